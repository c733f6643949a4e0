"""``mledger tokens``: what ``pulsar tokens`` does, so a CI set-up script needs no Java.

    mledger tokens create-secret-key [--output F] [--base64]
    mledger tokens create-key-pair [--signature-algorithm RS256|ES256] --output-private-key F --output-public-key G
    mledger tokens create --subject S (--secret-key K | --private-key K) [--expiry-time 1d]
    mledger tokens show [TOKEN | --token-file F | --stdin]
    mledger tokens validate [TOKEN | --token-file F | --stdin] (--secret-key K | --public-key K)

The files are Pulsar's (``TokensCliUtils``): a secret key is its raw bytes (base64 text with
``--base64``), a key pair the DER encodings of the keys (PKCS#8 private, X.509 public), so the
broker's ``tokenSecretKey`` / ``tokenPublicKey`` (``--token-secret-key file://...``) read them.
Keys are given as ``file://path``, ``data:;base64,<b64>``, a path, or base64. ``create`` prints
the token on stdout; ``--expiry-time`` takes Pulsar's relative times (``30s``, ``10m``, ``2h``,
``1d``, ``1w``, ``1y``). Needs PyJWT and cryptography (the ``server`` extra); argparse set-up
here imports neither, so other commands do not pay for them.
"""

from __future__ import annotations

import argparse
import base64
import json
import secrets
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["add_tokens_arguments", "parse_relative_time", "run_tokens"]

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400, "y": 365 * 86400}
_SECRET_BYTES = {"HS256": 32, "HS384": 48, "HS512": 64}


def parse_relative_time(text: str) -> int:
    """Seconds of a relative time (Pulsar's ``RelativeTimeUtil``): a number and an optional unit
    ``s``, ``m``, ``h``, ``d``, ``w``, ``y`` (no unit: seconds). ``ValueError`` naming ``text``."""
    value = text.strip()
    unit = value[-1:].lower()
    number = value[:-1] if unit in _UNITS else value
    if not number.isdigit():
        raise ValueError(f"invalid relative time {text!r}: expected a number and s, m, h, d, w or y (e.g. 1d)")
    return int(number) * _UNITS.get(unit, 1)


def add_tokens_arguments(parser: argparse.ArgumentParser) -> None:
    """The subcommands and options of ``mledger tokens`` (imports no JWT library)."""
    sub = parser.add_subparsers(dest="tokens_command", required=True, metavar="COMMAND")
    secret = sub.add_parser("create-secret-key", help="a random secret key for HS256 tokens")
    secret.add_argument("-a", "--signature-algorithm", default="HS256", choices=sorted(_SECRET_BYTES))
    secret.add_argument("-o", "--output", help="write the key to this file (default: stdout)")
    secret.add_argument("-b", "--base64", action="store_true", help="base64 text instead of the raw bytes")

    pair = sub.add_parser("create-key-pair", help="a private/public key pair for RS256 or ES256 tokens")
    pair.add_argument("-a", "--signature-algorithm", default="RS256", choices=["RS256", "ES256"])
    pair.add_argument("--output-private-key", required=True, help="the private key file (PKCS#8 DER)")
    pair.add_argument("--output-public-key", required=True, help="the public key file (X.509 DER)")

    create = sub.add_parser("create", help="a token for a subject, printed on stdout")
    create.add_argument("-s", "--subject", required=True, help="the role (the sub claim)")
    create.add_argument("-e", "--expiry-time", help="relative expiry: 30m, 2h, 1d, ... (default: never)")
    create.add_argument("-a", "--signature-algorithm", help="default: HS256, or RS256/ES256 from the private key")
    keys = create.add_mutually_exclusive_group(required=True)
    keys.add_argument("-sk", "--secret-key", help="file://F, data:;base64,<b64>, a path, or base64")
    keys.add_argument("-pk", "--private-key", help="file://F, data:;base64,<b64>, a path, or base64")

    show = sub.add_parser("show", help="print a token's header and body (no validation)")
    _token_source(show)

    validate = sub.add_parser("validate", help="check a token's signature and expiry; print its body")
    _token_source(validate)
    validate.add_argument("-a", "--signature-algorithm", help="restrict to this algorithm")
    vkeys = validate.add_mutually_exclusive_group(required=True)
    vkeys.add_argument("-sk", "--secret-key", help="file://F, data:;base64,<b64>, a path, or base64")
    vkeys.add_argument("-pk", "--public-key", help="file://F, data:;base64,<b64>, a path, or base64")


def _token_source(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("token", nargs="?", help="the token")
    parser.add_argument("-f", "--token-file", help="read the token from this file")
    parser.add_argument("-i", "--stdin", action="store_true", help="read the token from stdin")


def run_tokens(args: argparse.Namespace) -> int:
    """Run a parsed ``mledger tokens`` command; returns the exit status. Errors raise
    ``ConfigError`` / ``ValueError`` / ``OSError`` (the caller prints one line)."""
    command = args.tokens_command
    if command == "create-secret-key":
        return _create_secret_key(args)
    if command == "create-key-pair":
        return _create_key_pair(args)
    if command == "create":
        return _create(args)
    if command == "show":
        return _show(args)
    return _validate(args)


def _create_secret_key(args: argparse.Namespace) -> int:
    key = secrets.token_bytes(_SECRET_BYTES[args.signature_algorithm])
    data = base64.b64encode(key) if args.base64 else key
    if args.output:
        Path(args.output).write_bytes(data)
    else:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    return 0


def _create_key_pair(args: argparse.Namespace) -> int:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, rsa

    private: Any
    if args.signature_algorithm == "ES256":
        private = ec.generate_private_key(ec.SECP256R1())
    else:
        private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    Path(args.output_private_key).write_bytes(
        private.private_bytes(
            serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    Path(args.output_public_key).write_bytes(
        private.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    return 0


def _create(args: argparse.Namespace) -> int:
    import jwt

    claims: dict[str, Any] = {"sub": args.subject}
    if args.expiry_time:
        claims["exp"] = int(time.time()) + parse_relative_time(args.expiry_time)
    if args.secret_key is not None:
        key: Any = _key_bytes(args.secret_key, "--secret-key")
        algorithm = args.signature_algorithm or "HS256"
    else:
        key, family = _private_key(_key_bytes(args.private_key, "--private-key"))
        algorithm = args.signature_algorithm or family
    print(jwt.encode(claims, key, algorithm=algorithm))
    return 0


def _show(args: argparse.Namespace) -> int:
    import jwt

    token = _read_token(args)
    try:
        header = jwt.get_unverified_header(token)
        body = jwt.decode(token, options={"verify_signature": False})
    except jwt.InvalidTokenError as e:
        raise ValueError(f"not a JWT: {e}") from None
    print(f"header={json.dumps(header)}")
    print(f"body={json.dumps(body)}")
    return 0


def _validate(args: argparse.Namespace) -> int:
    from ..admin import AuthenticationError, AuthenticationSettings, Credentials, TokenProvider

    # the broker's own token check, so "valid here" means "accepted by mledger standalone"
    settings = AuthenticationSettings(
        token_secret_key=_as_data_url(args.secret_key, "--secret-key") if args.secret_key else None,
        token_public_key=_as_data_url(args.public_key, "--public-key") if args.public_key else None,
        token_public_alg=args.signature_algorithm,
    )
    token = _read_token(args)
    try:
        TokenProvider.from_settings(settings).authenticate(Credentials(token))
    except AuthenticationError as e:
        print(f"mledger tokens validate: {e}", file=sys.stderr)
        return 1
    import jwt

    print(json.dumps(jwt.decode(token, options={"verify_signature": False})))
    return 0


def _read_token(args: argparse.Namespace) -> str:
    if args.token_file:
        text = Path(args.token_file).read_text(encoding="utf-8")
    elif args.stdin:
        text = sys.stdin.read()
    elif args.token:
        text = args.token
    else:
        raise ValueError("give the token, --token-file F or --stdin")
    return text.strip()


def _key_bytes(value: str, option: str) -> bytes:
    """A key option's bytes: ``file://``, ``data:``, base64 (as the broker reads it), or a path."""
    from ..admin import read_key

    if not value.startswith(("file:", "data:")) and Path(value).is_file():
        return Path(value).read_bytes()
    return read_key(value, option)


def _as_data_url(value: str, option: str) -> str:
    return "data:;base64," + base64.b64encode(_key_bytes(value, option)).decode("ascii")


def _private_key(raw: bytes) -> tuple[Any, str]:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, rsa

    from ..core import ConfigError

    try:
        if raw.lstrip().startswith(b"-----BEGIN"):
            key: Any = serialization.load_pem_private_key(raw, password=None)
        else:
            key = serialization.load_der_private_key(raw, password=None)
    except (ValueError, TypeError) as e:
        raise ConfigError(f"--private-key is not a PKCS#8 private key: {e}") from None
    if isinstance(key, rsa.RSAPrivateKey):
        return key, "RS256"
    if isinstance(key, ec.EllipticCurvePrivateKey):
        return key, "ES256"
    raise ConfigError(f"--private-key: unsupported key type {type(key).__name__} (RSA or EC)")
