"""Skills: SKILL.md front matter, per-agent filtering, on-demand bodies, caching."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from clawbot.agents.profiles import AgentSpec
from clawbot.agents.skills import SkillError, SkillLibrary, parse_skill
from clawbot.agents.workspace import RECHECK_SECONDS
from clawbot.app import Clawbot
from clawbot.clock import ManualClock
from clawbot.policies import ToolPolicy
from clawbot.testing import MemoryChannel, ScriptedModel, call

from .conftest import Chat
from .test_file_tools import STALL_LIMIT, open_both_ends

ALL_TOOLS = {"file_read", "file_write", "skill_read"}


def skill_file(root: Path, name: str, front: str, body: str = "Do the thing.") -> Path:
    path = root / "skills" / name / "SKILL.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\n{front}\n---\n{body}\n")
    return path


def test_front_matter_gives_name_description_and_required_tools(tmp_path: Path) -> None:
    text = (
        "---\n"
        "name: deploy\n"
        'description: "Ship it: safely"\n'
        "requires:\n"
        "  tools:\n"
        "    - file_read\n"
        "    - file_write\n"
        "---\n"
        "# Steps\n1. Check.\n"
    )

    skill = parse_skill(text, tmp_path / "deploy" / "SKILL.md")

    assert (skill.name, skill.description) == ("deploy", "Ship it: safely")
    assert skill.requires_tools == ("file_read", "file_write")
    assert skill.body == "# Steps\n1. Check."


def test_required_tools_may_be_an_inline_list_and_the_name_defaults_to_the_folder(
    tmp_path: Path,
) -> None:
    text = "---\ndescription: Review code\nrequires:\n  tools: [file_read, 'list_dir']\n---\nx\n"

    skill = parse_skill(text, tmp_path / "review" / "SKILL.md")

    assert skill.name == "review"
    assert skill.requires_tools == ("file_read", "list_dir")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("# no front matter\n", "must start with a '---' front matter block"),
        ("---\nname: x\n", "not closed with '---'"),
        ("---\nname: x\n---\nbody\n", "needs a 'description: ...' line"),
        ("---\ndescription: d\njust words\n---\n", "line 3: expected 'key: value'"),
    ],
)
def test_unusable_front_matter_says_what_is_wrong(tmp_path: Path, text: str, problem: str) -> None:
    with pytest.raises(SkillError, match=problem):
        parse_skill(text, tmp_path / "x" / "SKILL.md")


def test_a_broken_skill_is_skipped_and_reported_while_the_others_load(tmp_path: Path) -> None:
    skill_file(tmp_path, "good", "description: works")
    skill_file(tmp_path, "bad", "name: bad")
    library = SkillLibrary(tmp_path / "skills")

    assert [s.name for s in library.all()] == ["good"]
    assert library.problems == (
        "skills/bad/SKILL.md: the front matter needs a 'description: ...' line",
    )


def test_skills_are_filtered_by_the_agents_skill_policy_and_deny_wins(tmp_path: Path) -> None:
    for name in ("alpha", "beta", "beta-2"):
        skill_file(tmp_path, name, f"description: {name}")
    library = SkillLibrary(tmp_path / "skills")
    agent = AgentSpec(
        agent_id="a", name="a", skills=ToolPolicy(allow=("alpha", "beta*"), deny=("beta-2",))
    )

    assert [s.name for s in library.for_agent(agent, ALL_TOOLS)] == ["alpha", "beta"]


def test_a_skill_whose_required_tools_the_agent_lacks_is_not_listed(tmp_path: Path) -> None:
    skill_file(tmp_path, "writes", "description: w\nrequires:\n  tools: [file_write]")
    skill_file(tmp_path, "reads", "description: r\nrequires:\n  tools: [file_read]")
    library = SkillLibrary(tmp_path / "skills")
    agent = AgentSpec(agent_id="a", name="a")

    assert [s.name for s in library.for_agent(agent, {"file_read", "skill_read"})] == ["reads"]
    assert library.for_agent(agent, {"file_read", "file_write"}) == ()


def test_skills_are_discovered_once_and_reread_within_a_second_of_a_change(
    tmp_path: Path,
) -> None:
    path = skill_file(tmp_path, "notes", "description: first")
    clock = ManualClock()
    library = SkillLibrary(tmp_path / "skills", clock=clock)
    first = library.all()

    assert library.all() is first
    path.write_text("---\ndescription: second version\n---\nbody\n")
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    skill_file(tmp_path, "added", "description: new")
    assert library.all() is first
    clock.advance(RECHECK_SECONDS)

    assert [(s.name, s.description) for s in library.all()] == [
        ("added", "new"),
        ("notes", "second version"),
    ]


def test_a_skill_written_from_inside_is_seen_at_once(tmp_path: Path) -> None:
    skill_file(tmp_path, "notes", "description: first")
    library = SkillLibrary(tmp_path / "skills", clock=ManualClock())
    library.all()
    skill_file(tmp_path, "added", "description: new")
    library.changed()

    assert [s.name for s in library.all()] == ["added", "notes"]


async def test_only_the_active_agents_skills_are_listed_in_its_prompt(
    chat: Chat, scripted: ScriptedModel
) -> None:
    await chat.say("hello")
    await chat.say("/agent coder")
    await chat.say("hello")

    main, coder = scripted.requests[0].system, scripted.requests[1].system
    assert "- research-brief: Answer a research question" in main
    assert "- code-review: Review a change or a file" in main
    assert "- code-review: Review a change or a file" in coder
    assert "research-brief" not in coder
    assert "plain-writing" not in coder
    assert "most important first: `file:line" not in coder  # the body is not in the prompt


async def test_skill_read_returns_the_body_of_an_allowed_skill(
    chat: Chat, scripted: ScriptedModel
) -> None:
    scripted.add(call("skill_read", name="code-review"), "Reviewing.")

    await chat.say("/agent coder")
    await chat.say("review my code")

    body = scripted.requests[1].tool_results[0]
    assert body.startswith("# Code review")
    assert "---" not in body.splitlines()[0]


async def test_skill_read_refuses_a_skill_the_agent_may_not_use(
    chat: Chat, scripted: ScriptedModel
) -> None:
    scripted.add(call("skill_read", name="research-brief"), "Cannot.")

    await chat.say("/agent coder")
    await chat.say("research this")

    assert scripted.requests[1].tool_results[0] == (
        "error: no skill named 'research-brief' is available to you — your skills: code-review"
    )


async def test_an_agent_without_skill_read_gets_no_skills_listed(
    bot: Clawbot, channel: MemoryChannel, scripted: ScriptedModel
) -> None:
    main = bot.agents.get("main")
    await bot.agents.update(
        main.model_copy(update={"tools": ToolPolicy(allow=("*",), deny=("skill_read",))})
    )

    await bot.router.handle(channel.message("hello"))

    assert "## Skills" not in scripted.requests[0].system


# skills opened beneath the workspace's root ---------------------------------------------------


def test_a_skill_linking_outside_the_workspace_is_left_out_and_said_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """An agent's shell may make links in the workspace; the skills listed to the model (and
    read by ``skill_read``) must not carry the host's files they name."""
    workspace = tmp_path / "ws"
    skill_file(workspace, "good", "description: works")
    host = skill_file(tmp_path / "host", "leak", "description: the host's secret")
    (workspace / "skills" / "leak").symlink_to(host.parent)
    (workspace / "skills" / "file").mkdir()
    (workspace / "skills" / "file" / "SKILL.md").symlink_to(host)
    library = SkillLibrary(workspace / "skills", clock=ManualClock())

    first = library.all()
    library.changed()
    again = library.all()

    assert [s.name for s in first] == [s.name for s in again] == ["good"]
    said = [r.getMessage() for r in caplog.records if "left out" in r.getMessage()]
    assert said == [
        f"skill skills/{name}/SKILL.md left out: it leads outside the workspace (through a "
        "link); copy the skill into the workspace instead"
        for name in ("file", "leak")
    ]


def test_a_skill_linking_to_another_folder_of_the_workspace_is_read(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    skill_file(workspace / "shared", "review", "description: Review code")
    (workspace / "skills").mkdir(parents=True)
    (workspace / "skills" / "review").symlink_to("../shared/skills/review")

    library = SkillLibrary(workspace / "skills")

    assert [(s.name, s.description) for s in library.all()] == [("review", "Review code")]


async def test_a_named_pipe_as_a_skill_is_skipped_not_waited_on(tmp_path: Path) -> None:
    skill_file(tmp_path, "good", "description: works")
    pipe = tmp_path / "skills" / "pipe" / "SKILL.md"
    pipe.parent.mkdir()
    os.mkfifo(pipe)
    library = SkillLibrary(tmp_path / "skills")

    reading = asyncio.create_task(asyncio.to_thread(library.all))
    done, _ = await asyncio.wait({reading}, timeout=STALL_LIMIT)
    if not done:  # stuck opening the pipe: free it, then fail
        os.close(open_both_ends(pipe))
        await reading
        pytest.fail(f"the skills waited {STALL_LIMIT:.0f} s for the pipe's writer")

    assert [s.name for s in reading.result()] == ["good"]
