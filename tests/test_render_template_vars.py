"""One list of a template's variables (`render._template_vars`): a render and the measure of what
a template writes around a cut's texts (`render._template_costs`) give a template the same ones.
A drift must fail here, not answer zeros that quietly weaken the budget search's guess."""

from __future__ import annotations

import pytest
from jinja2 import meta

from context_editor import ContextEditor
from context_editor.inject import render as render_module
from context_editor.inject.tokens import segment_counter

BUNDLED = sorted(p.name for p in render_module.TEMPLATES_DIR.glob("*.j2"))
TEMPLATE_VARS = {"action", "domain", "round", "budget", "tokens", "tokens_estimated", "phase", "system", "goal", "subtask",
                 "fields", "states", "state_lines", "missing", "alerts", "dropped", "lost", "entities", "summary", "history",
                 "turns", "lines", "domain_shown"}


@pytest.fixture(scope="module")
def env():
    return ContextEditor("ecommerce", "memory://").renderer.env


def test_the_builder_gives_every_variable_it_names():
    args = {name: None for name in TEMPLATE_VARS}
    assert set(render_module._template_vars(**{**args, "lines": []})) == TEMPLATE_VARS
    assert set(render_module._template_vars(**args)) == TEMPLATE_VARS - {"lines", "domain_shown"}


@pytest.mark.parametrize("name", BUNDLED)
def test_every_bundled_template_reads_only_variables_the_builder_gives(env, name):
    source = env.loader.get_source(env, name)[0]
    assert meta.find_undeclared_variables(env.parse(source)) <= TEMPLATE_VARS


@pytest.mark.parametrize("name", BUNDLED)
def test_every_bundled_template_measures_what_it_writes_around_a_cut(env, name):
    template = env.get_template(name)
    template.__dict__.pop("_ce_costs", None)  # measured afresh
    noted, lines, line, first = render_module._template_costs(template, segment_counter(None))
    assert noted > 0 and lines > 0 and line > 0 and first >= line
