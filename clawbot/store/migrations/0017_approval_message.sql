-- The platform id of the message that asked for an approval (the part that carries its
-- buttons): once the request is answered or expires, that message is edited to say so and
-- its buttons are removed. NULL where the channel has no buttons or the send failed.
ALTER TABLE approvals ADD COLUMN message_id TEXT;
