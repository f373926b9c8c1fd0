"""servewatch's matcher and regex checks (spec/matchers.py) against the real `promtool check rules`.

Whatever servewatch accepts, promtool must accept: an accepted matcher is written into a rule as it
is (respelt canonically). Where the two differ, servewatch is the stricter one, and only in the
places spec/matchers.py names: raw control characters and bytes that are not UTF-8 in a value,
values in single quotes or backticks and quoted label names (the builders re-read only
`name="value"`), \\p{...} of Unicode 16 scripts RE2 does not know yet, groups nested over 100 deep,
and regexes servewatch's own PromQL reader (promql-parser) cannot read (\\Q...\\E, an empty (?),
a surrogate \\x{D800}, a group name used twice). Each case is one rule in one rule file, so one
promtool run checks them all.
"""

import json
import os
import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from servewatch import tools
from servewatch.spec import matchers

RULE_RE = re.compile(r'rule (\d+), "check:matcher:parses": (.*)')


def promtool_refusals(tmp_path, matcher_texts: list[str]) -> dict[int, str]:
    """index -> promtool's error, for the matcher texts promtool refuses in `up{...}`."""
    rules = [{"record": "check:matcher:parses", "expr": "up{" + text + "}"} for text in matcher_texts]
    path = tmp_path / "matchers.rules.yaml"
    path.write_text(json.dumps({"groups": [{"name": "matchers", "rules": rules}]}))  # JSON is YAML
    res = tools.run("promtool", "check", "rules", path, errors="replace")
    refused = {int(m.group(1)) - 1: m.group(2) for m in RULE_RE.finditer(res.stdout + res.stderr)}
    assert res.returncode == (1 if refused else 0), res.stderr[-2000:]
    return refused


def ours(text: str) -> str | None:
    try:
        matchers.parse(text)
        return None
    except ValueError as exc:
        return str(exc)


def go_string(value: str) -> str:
    """`value` as a PromQL double-quoted string, control characters escaped."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + re.sub(r"[\x00-\x1f\x7f]", lambda m: f"\\x{ord(m.group()):02x}", escaped) + '"'


# Regexes where Go's regexp and other engines part ways, plus plain mistakes.
REGEXES = [
    *[
        r"abort|error",
        r".*dcgm.*",
        r"(?i)vllm",
        r"(?P<n>a)",
        r"(?<n>a)",
        r"\pL+",
        r"\p{Greek}",
        r"[[:alpha:]]",
    ],
    *[r"\z", r"\A", r"(?U)a+", r"(?s-m:x)", r"[^\x00-\x{10FFFF}]", r"x{0}", r"a{1000}"],
    *[r"(?:a{2}){500}", r"\x41", r"\w\W\s\S\d\D", r"[a-]", r"a|", r"()", r"\b", r"\v"],
    *[r"a\Cb", r"[\C]", r"(?=x)", r"(?<=a)b", r"(?>a)", r"\1", r"(?P=n)", r"a**", r"a++", r"x*+"],
    *[r"a{1001}", r"(a{100}){100}", r"(?:a{2}){501}", r"a{2,1}", r"[z-a]", r"\Z", r"\X", r"\R", r"\e"],
    *[r"\8", r"\p{Foo}", r"[[:foo:]]", r"(a", r"a)", r"[a", r"*", r"+a", r"?", "\\"],
    *[r"\x{110000}", r"(?i)*", r"(?P<na-me>a)", r"\p", r"x{2}{3}", r"(?#c)"],
    "(" * 100 + ")" * 100,
]
# Places where servewatch is deliberately stricter than promtool (see spec/matchers.py).
STRICTER = [
    *[r"\Qa.b\E", r"\Qa.b", r"\Q{\E", r"(?)", r"\x{D800}", r"(?P<n>a)(?P<n>b)"],
    r"\p{Garay}",
    r"\p{Todhri}",
    r"\p{Sunuwar}",
    "(" * 101 + ")" * 101,
    "(" * 500 + ")" * 500,
]
# Matcher texts: PromQL's string syntax, escapes and separators.
TEXTS = [
    *['job="x"', 'job="x",', ' job = "x" ,\n env != "prod" ', 'a="\\n\\t\\\\\\""', 'a="\\u00e9\\U0001F600"'],
    *['a="\\x41\\101"', 'a=~"\\\\d+"', 'a=""', 'a="x" b="y"', 'a=="x"'],
    *['a="x",,b="y"', ",", 'a="\\d"', 'a="\\\'"', 'a="\\ud800"', 'a="\\400"', 'a="\\7"', 'a="\\x4"'],
    *['1a="x"', "a=", 'a="x', 'a="x\ny"', 'a=~"(x"', 'tëam="x"', 'a="x"}', '{a="x"}'],
]
TEXTS_STRICTER = ["a='x'", "a=`x`", '"a"="x"', 'a="x\ty"', 'a="x\x01"', 'a="x\x7f"', 'a="\\xff"', 'a="\\377"']


def test_the_regex_and_matcher_checks_agree_with_promtool(tmp_path):
    cases = [f"a=~{go_string(r)}" for r in REGEXES] + TEXTS
    stricter = [f"a=~{go_string(r)}" for r in STRICTER] + TEXTS_STRICTER
    refused = promtool_refusals(tmp_path, cases + stricter)
    disagree = [
        (text, refused.get(i), ours(text))
        for i, text in enumerate(cases)
        if (i in refused) != (ours(text) is not None)
    ]
    assert not disagree, disagree
    assert len(refused) >= len(cases) // 3  # the corpus holds mistakes, and promtool saw them
    for i, text in enumerate(stricter, start=len(cases)):
        assert i not in refused and ours(text) is not None, (text, refused.get(i))


REGEX_PIECES = [
    *["a", "b", ".", "*", "+", "?", "|", "(", ")", "(?:", "(?i)", "(?P<n>", "[", "]", "^", "-", "{", "}"],
    *["{2}", "{1,3}", "{1001}", ",", "\\", "\\d", "\\b", "\\C", "\\Q", "\\E", "\\p{L}", "\\pN", "[:alpha:]"],
    *[
        "\\x{41}",
        "\\x4",
        "\\1",
        "\\z",
        "$",
        "é",
        " ",
        "0",
        "\\.",
        "(?s)",
        "(?U)",
        "\\8",
        "\\v",
        "(?#",
        "\\\\",
    ],
]
TEXT_PIECES = [
    *["job", "a", "_x", "1a", "=", "!=", "=~", "!~", '"', ",", " ", "\n", "\\", "\\n", "\\d", "\\\\d"],
    *["\\x41", "\\u00e9", "\\ud800", "\\101", "\\400", ".*", "(", ")", "[", "é", 'job="x"', '\\"', "\\C"],
]
regexes = st.lists(st.sampled_from(REGEX_PIECES), min_size=1, max_size=12).map("".join)
texts = st.lists(st.sampled_from(TEXT_PIECES), min_size=1, max_size=8).map("".join)
batches = st.lists(st.one_of(regexes.map(lambda r: f"a=~{go_string(r)}"), texts), min_size=400, max_size=400)


def deliberately_stricter(text: str, why: str) -> bool:
    """The places spec/matchers.py refuses what promtool takes: control characters, bytes that are
    not UTF-8, a quoted label name, a regex promql-parser cannot read."""
    quoted_name = "expected a label name" in why and re.search(r'(^|,)\s*"', text)
    return bool(re.search(r"control character|UTF-8|promql-parser", why) or quoted_name)


@settings(
    max_examples=int(os.environ.get("SERVEWATCH_FUZZ_MATCHER_BATCHES", "3")),
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(batch=batches)
def test_generated_matchers_never_pass_where_promtool_refuses(tmp_path_factory, batch):
    refused = promtool_refusals(tmp_path_factory.mktemp("matchers"), batch)
    verdicts = [ours(text) for text in batch]
    accepted_wrongly = [(t, refused[i]) for i, t in enumerate(batch) if i in refused and verdicts[i] is None]
    assert not accepted_wrongly
    refused_wrongly = [
        (t, verdicts[i])
        for i, t in enumerate(batch)
        if i not in refused and verdicts[i] is not None and not deliberately_stricter(t, verdicts[i])
    ]
    assert not refused_wrongly
