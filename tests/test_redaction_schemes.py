"""Redaction of any ``Authorization`` scheme's credential and of keys holding a sensitive compound."""

from __future__ import annotations

import pytest

from fastapi_mcp_ctx._context.logger import REDACTED, redact, redact_text


@pytest.mark.parametrize(
    ("line", "kept"),
    [
        ("Authorization: DPoP Kz5xSECRET rest", "rest"),
        ("proxy-authorization: Negotiate YIIGSECRET, next", "next"),
        ('{"Authorization": "ApiKey sk-SECRET"}', "{"),
        ("x_authorization=Hoba SECRET&page=2", "page=2"),
        ("Authorization: Bearer Bearer SECRET rest", "rest"),
        ("authorization=SECRET", "authorization="),
    ],
)
def test_the_credential_after_any_scheme_word_is_masked_and_the_rest_kept(line: str, kept: str) -> None:
    masked = redact_text(line)
    assert "SECRET" not in masked and REDACTED in masked and kept in masked, masked
    assert redact_text(masked) == masked  # idempotent: a masked line stays as it is


@pytest.mark.parametrize("key", ["private_key_pem", "privateKeyPem", "user_password_hash", "apikeyValue", "db_credentials_json", "client_secret_b64"])
def test_a_key_holding_a_sensitive_compound_anywhere_is_masked(key: str) -> None:
    assert redact({key: "x", "pem_format": "pkcs8"}) == {key: REDACTED, "pem_format": "pkcs8"}
