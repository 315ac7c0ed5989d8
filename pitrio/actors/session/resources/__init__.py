"""Resources a session loads (spec §6, §8): settings, skills, prompt templates, context
files and the system prompt. Pure modules (no trio); file reads are plain functions.

``loader.load_resources`` bundles everything; ``loader.expand_input`` is the funnel's
expansion step; ``system_prompt`` builds the prompt as named sections.
"""

from pitrio.actors.session.resources.loader import (
    ExpansionError,
    ResourceOptions,
    Resources,
    commands,
    expand_input,
    load_resources,
    system_prompt_options,
    system_prompt_sections,
)
from pitrio.actors.session.resources.settings import Settings, SettingsProblem, load_settings
from pitrio.actors.session.resources.system_prompt import (
    PromptSection,
    build_system_prompt,
    render_sections,
    section_map,
)

__all__ = [
    "ExpansionError",
    "PromptSection",
    "ResourceOptions",
    "Resources",
    "Settings",
    "SettingsProblem",
    "build_system_prompt",
    "commands",
    "expand_input",
    "load_resources",
    "load_settings",
    "render_sections",
    "section_map",
    "system_prompt_options",
    "system_prompt_sections",
]
