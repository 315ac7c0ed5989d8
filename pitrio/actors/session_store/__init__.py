"""The session store actor: the JSONL entry tree of one session file (DESIGN §2)."""
