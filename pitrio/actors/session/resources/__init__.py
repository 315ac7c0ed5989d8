"""Resources a session loads: settings (and later skills, prompt templates, context files)."""
