"""The session layer: wires an agent loop to its session file and to subscribers."""
