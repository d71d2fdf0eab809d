"""`make mutate`'s scope is one file, tests/mutation_scope.toml: pyproject.toml's `only_mutate`,
the test files it names and the functions it names must agree with it, or the mutation run
would mutate too little, run tests that are gone or accept survivors without a reason."""

from __future__ import annotations

from pathlib import Path

from tests.support.mutation import disagreements, load


def test_the_mutation_scope_agrees_with_pyproject_the_code_and_the_tests() -> None:
    scope = load()
    assert disagreements(scope) == []
    assert len(scope.functions) > 0 and len(scope.accepted) > 0


def test_a_scope_that_disagrees_is_refused_with_each_disagreement(tmp_path: Path) -> None:
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "rules.py").write_text(
        "def allowed(): ...\n\nclass Counts:\n    def add(self): ...\n"
    )
    (tmp_path / "app" / "other.py").write_text("def other(): ...\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_rules.py").write_text("")
    (tmp_path / "pyproject.toml").write_text(
        '[tool.mutmut]\nonly_mutate = ["app/rules.py", "app/gone.py"]\n'
    )
    scope_file = tmp_path / "scope.toml"
    scope_file.write_text(
        """
[[functions]]
file = "app/rules.py"
names = ["allowed", "Counts.add", "Counts.*", "renamed"]
tests = ["tests/test_rules.py", "tests/test_moved.py"]

[[functions]]
file = "app/other.py"
names = ["other", "other"]
tests = ["tests/test_rules.py"]

[accepted."app.rules.xǁCountsǁadd__mutmut_3"]
change = 'self.total -= total'
reason = '''
Why it cannot matter.'''

[accepted."app.rules.x_allowed__mutmut_1"]
change = 'return None'
reason = ''

[accepted."app.elsewhere.x_allowed__mutmut_2"]
change = 'return 1'
reason = 'A function out of the scope.'
"""
    )
    assert disagreements(load(scope_file), tmp_path) == [
        "app/other.py has functions in the scope but is not in only_mutate",
        "app/gone.py is in only_mutate but has no function in the scope",
        "tests/test_moved.py is named as covering tests but does not exist",
        "app.rules.renamed is not a function of app/rules.py",
        "app.other.other is named twice",
        "accepted app.elsewhere.x_allowed__mutmut_2 is not a mutant of a function in the scope",
        "accepted app.rules.x_allowed__mutmut_1 needs both its change and a reason",
    ]
