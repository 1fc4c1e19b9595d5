"""The principal of a TLS client certificate, as Kafka's `DefaultKafkaPrincipalBuilder` and
`SslPrincipalMapper` make it: the certificate subject's distinguished name in RFC 2253 form
(`X500Principal.getName()`: most specific attribute first, e.g. `CN=writer,OU=apps,O=Example`), passed
through `ssl.principal.mapping.rules`:

    RULE:^CN=(.*?),OU=(.*?)$/$1/L,DEFAULT

Each `RULE:pattern/replacement/[L|U]` is tried in order on the whole DN (Java's `Matcher.matches`); the first
that matches gives the name (lower- or upper-cased when asked); `DEFAULT` gives the DN unchanged. With no
rule matching, the handshake fails as in Kafka (`NoMatchingRule`). The principal is `User:<name>`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cryptography import x509

# Kafka's SslPrincipalMapper.RULE_PARSER
_RULE = re.compile(r"\s*((DEFAULT)|RULE:((?:[^/\\]|\\.)*)/((?:[^/\\]|\\.)*)/?([LU])?)\s*(,|$)")


class PrincipalMappingError(ValueError):
    """A rule that does not parse, or a DN no rule applies to."""


@dataclass(frozen=True)
class MappingRule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    case: str | None = None  # "L", "U" or None

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if self.pattern.fullmatch(dn) is None:
            return None
        # Java's replaceAll: $1 is a group; Python's \1
        name = self.pattern.sub(re.sub(r"\$(\d+)", r"\\\1", self.replacement), dn)
        return name.lower() if self.case == "L" else name.upper() if self.case == "U" else name


def parse_rules(text: str) -> tuple[MappingRule, ...]:
    """`ssl.principal.mapping.rules`; PrincipalMappingError naming the part that does not parse."""
    rules: list[MappingRule] = []
    position = 0
    text = text.strip()
    while position < len(text):
        match = _RULE.match(text, position)
        if match is None or match.end() == position:
            raise PrincipalMappingError(f"ssl.principal.mapping.rules: cannot parse {text[position:]!r} "
                                        "(RULE:pattern/replacement/[LU] or DEFAULT, comma-separated)")
        if match.group(2):
            rules.append(MappingRule(None))
        else:
            try:
                pattern = re.compile(match.group(3))
            except re.error as e:
                raise PrincipalMappingError(f"ssl.principal.mapping.rules: {match.group(3)!r}: {e}") from None
            rules.append(MappingRule(pattern, match.group(4), match.group(5)))
        position = match.end()
    return tuple(rules) or (MappingRule(None),)


DEFAULT_RULES = (MappingRule(None),)


def distinguished_name(certificate_der: bytes) -> str:
    """The subject DN of a DER certificate in RFC 2253 order (most specific attribute first)."""
    return x509.load_der_x509_certificate(certificate_der).subject.rfc4514_string()


def principal_name(dn: str, rules: tuple[MappingRule, ...] = DEFAULT_RULES) -> str:
    for rule in rules:
        name = rule.apply(dn)
        if name is not None:
            return name
    raise PrincipalMappingError(f"No rules apply to {dn}, rules {rules}")
