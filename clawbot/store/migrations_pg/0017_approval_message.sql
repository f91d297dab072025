-- The platform id of the message that asked for an approval, edited once it is answered.
ALTER TABLE approvals ADD COLUMN message_id TEXT COLLATE "C";
