"""The RFC 6570 matcher of resource templates (``_wire.uri_template``): the inverse of expansion.

Known fault B40 (optional, order-free query variables; a match binding nothing is a match),
and the matcher rules: literals escaped, values decoded exactly once after matching, a ``/``
smuggled into a simple ``{var}`` refused, a malformed escape a -32602 error, never a crash.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastapi_mcp_ctx._wire.uri_template import UriTemplate
from fastapi_mcp_ctx.errors import UriMatchError

# Text rich in what breaks matchers: reserved characters, '%', '/', '+', spaces, non-ASCII.
TRICKY = st.text(alphabet=st.sampled_from([*"aZ09-._~:/?#[]@!$&'()*+,;=% ", "é", "ü", "中", "😀", "\u00a0"]), max_size=12)
NO_SLASH = TRICKY.filter(lambda s: "/" not in s and s not in (".", ".."))  # one segment: no '/', no dot segment
NON_EMPTY = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=8)


@settings(max_examples=300, deadline=None)
@given(owner=NO_SLASH, path=TRICKY, segments=st.lists(NO_SLASH, max_size=4), q=st.none() | TRICKY, limit=st.none() | TRICKY)
def test_match_is_the_inverse_of_expansion(owner: str, path: str, segments: list[str], q: str | None, limit: str | None) -> None:
    cases = [
        (UriTemplate("test://users/{owner}/profile"), {"owner": owner}),
        (UriTemplate("file:///{+path}"), {"path": path}),
        (UriTemplate("repo://{owner}{/segments*}"), {"owner": owner, "segments": segments}),
        (UriTemplate("search://items/{owner}{?q,limit}"), {"owner": owner, "q": q, "limit": limit}),
        (UriTemplate("x{?q}{&limit}"), {"q": q, "limit": limit}),
    ]
    for template, values in cases:
        uri = template.expand(values)
        assert template.match(uri) == {k: v for k, v in values.items() if v is not None}, (template, uri)


@settings(max_examples=200, deadline=None)
@given(value=NON_EMPTY)
def test_any_text_round_trips_through_a_reserved_variable(value: str) -> None:
    template = UriTemplate("notes://{+name}")
    assert template.match(template.expand({"name": value})) == {"name": value}


@settings(max_examples=200, deadline=None)
@given(uri=st.text(max_size=40))
def test_arbitrary_uris_match_or_refuse_but_never_crash(uri: str) -> None:
    for template in (UriTemplate("test://t/{id}/data"), UriTemplate("a://{+p}"), UriTemplate("q://x{?a,b}"), UriTemplate("r://{x}{/s*}")):
        try:
            template.match(uri)
        except UriMatchError as exc:
            assert exc.code == -32602 and exc.data["uri"] == uri


def test_optional_query_variables_any_subset_any_order() -> None:
    template = UriTemplate("dom://{pageId}{?selector,includeText}")
    assert template.match("dom://p1") == {"pageId": "p1"}
    assert template.match("dom://p1?includeText=true") == {"pageId": "p1", "includeText": "true"}
    assert template.match("dom://p1?includeText=true&selector=body") == {"pageId": "p1", "includeText": "true", "selector": "body"}
    assert template.match("dom://p1?selector=body&includeText=true") == {"pageId": "p1", "includeText": "true", "selector": "body"}
    assert template.match("dom://p1?unknown=1") == {"pageId": "p1"}  # documented: an unnamed parameter is ignored


def test_query_only_template_binds_nothing_and_still_matches() -> None:
    template = UriTemplate("data://config{?format}")
    assert template.match("data://config") == {}  # a match, not a falsy "no match"
    assert template.match("data://config") is not None
    assert template.match("data://config?format=yaml") == {"format": "yaml"}
    assert template.match("data://other") is None


def test_round_trip_of_query_continuation() -> None:
    template = UriTemplate("x{?one}{&two}")
    uri = template.expand({"one": "1", "two": "2"})
    assert uri == "x?one=1&two=2"
    assert template.match(uri) == {"one": "1", "two": "2"}


def test_literals_are_escaped_not_regex() -> None:
    template = UriTemplate("a.b://x+y/{id}(v1)")
    assert template.match("a.b://x+y/7(v1)") == {"id": "7"}
    assert template.match("aXb://x+y/7(v1)") is None
    assert template.match("a.b://xxy/7(v1)") is None


def test_values_are_decoded_exactly_once() -> None:
    template = UriTemplate("test://t/{id}/data")
    assert template.match("test://t/a%2520b/data") == {"id": "a%20b"}  # not "a b"
    assert template.match("test://t/%C3%A9/data") == {"id": "é"}
    assert template.match("test://t/é/data") == {"id": "é"}


def test_simple_variable_decoding_to_a_slash_is_refused() -> None:
    template = UriTemplate("file:///docs/{name}")
    with pytest.raises(UriMatchError) as caught:
        template.match("file:///docs/..%2F..%2Fetc%2Fpasswd")
    assert caught.value.code == -32602 and caught.value.reason == "invalid_uri"
    assert template.match("file:///docs/a/b") is None  # a raw '/' does not fit a simple variable


@pytest.mark.parametrize("uri", ["test://t/%G1/data", "test://t/50%/data", "test://t/%/data", "test://t/%FF/data", "test://t/%C3/data"])
def test_malformed_escape_is_a_32602_error(uri: str) -> None:
    with pytest.raises(UriMatchError) as caught:
        UriTemplate("test://t/{id}/data").match(uri)
    assert caught.value.to_error(1)["data"] == {"requestId": 1, "reason": "invalid_uri", "uri": uri}


def test_repeated_query_parameter_is_refused() -> None:
    with pytest.raises(UriMatchError):
        UriTemplate("q://x{?a}").match("q://x?a=1&a=2")


def test_a_query_on_a_template_without_one_does_not_match() -> None:
    assert UriTemplate("test://t/{id}").match("test://t/1?x=1") is None


def test_path_segments() -> None:
    template = UriTemplate("repo://{owner}{/parts*}")
    assert template.match("repo://me") == {"owner": "me", "parts": []}
    assert template.match("repo://me/a/b%2Cc/") == {"owner": "me", "parts": ["a", "b,c", ""]}
    assert template.expand({"owner": "me", "parts": ["a b", "c"]}) == "repo://me/a%20b/c"


@pytest.mark.parametrize(
    "template",
    ["x://{#frag}", "x://{.ext}", "x://{;p}", "x://{var:3}", "x://{a}{b}", "x://{a}?x=1", "x://{?a}/tail", "x://{a}/{a}", "x://{a-b}", "x://{a*}", "x://{a"],
)
def test_unsupported_or_ambiguous_templates_are_refused_at_registration(template: str) -> None:
    with pytest.raises(ValueError):
        UriTemplate(template)


# -- every operator decoding into one segment refuses '/' and dot segments (issue 24 item 10) ----

SEGMENT_TEMPLATES = [
    ("pseg://d/{seg}", "pseg://d/{}"),  # simple
    ("pseg://d/{a,seg}", "pseg://d/x,{}"),  # simple, two variables
    ("pseg://d{/seg}", "pseg://d/{}"),  # path segment
    ("pseg://d{/a,seg}", "pseg://d/x/{}"),  # path segments, two variables
    ("pseg://d{/seg*}", "pseg://d/x/{}/y"),  # exploded: each item
]
TRAVERSALS = ["..%2F..%2Fetc%2Fpasswd", "a%2Fb", "%2F", "..", ".", "%2E%2E", "%2e", ".%2E"]


@pytest.mark.parametrize(("template", "form"), SEGMENT_TEMPLATES)
@pytest.mark.parametrize("value", TRAVERSALS)
def test_every_segment_operator_refuses_slashes_and_dot_segments(template: str, form: str, value: str) -> None:
    with pytest.raises(UriMatchError) as caught:
        UriTemplate(template).match(form.format(value))
    assert caught.value.code == -32602 and caught.value.reason == "invalid_uri"
    assert caught.value.data["uri"] == form.format(value)


@pytest.mark.parametrize(("template", "form"), SEGMENT_TEMPLATES)
@pytest.mark.parametrize("value", ["...", ".a", "a.", "%2E%2E%2E", "a%20b", "%C3%A9"])
def test_segment_operators_keep_dotted_names_that_are_not_dot_segments(template: str, form: str, value: str) -> None:
    values = UriTemplate(template).match(form.format(value))
    assert values is not None
    seg = values["seg"]
    decoded = seg if isinstance(seg, str) else seg[1]
    assert decoded == {"%2E%2E%2E": "...", "a%20b": "a b", "%C3%A9": "é"}.get(value, value)


def test_reserved_expansion_and_query_values_are_not_segments() -> None:
    assert UriTemplate("file:///{+path}").match("file:///a/../../etc%2Fpasswd") == {"path": "a/../../etc/passwd"}  # the handler confines it
    assert UriTemplate("q://x{?p}").match("q://x?p=..%2Fa") == {"p": "../a"}
