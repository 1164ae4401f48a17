"""Which host names mean "this machine only" (ADR 0044).

Loopback is the whole 127.0.0.0/8 block, ::1 (also as ::ffff:127.x.y.z) and the
name `localhost`. IPv4 is read the way inet_aton reads it, as the resolver does for
`--host` and curl does for URLs: `127.1`, `0x7f.1` and `2130706433` are all
127.0.0.1. Other names are not loopback, whatever they resolve to today (a DNS
rebinding attack points a foreign name at 127.0.0.1).
"""

from __future__ import annotations

import ipaddress

_DIGITS = {8: "01234567", 10: "0123456789", 16: "0123456789abcdef"}
_LAST_PART_LIMIT = {1: 1 << 32, 2: 1 << 24, 3: 1 << 16, 4: 1 << 8}  # the bytes it fills


def host_name(authority: str) -> str:
    """The host of a Host header or URL authority: `[::1]:80` -> `::1`, `a:80` -> `a`."""
    if authority.startswith("["):
        return authority[1 : authority.find("]")] if "]" in authority else authority[1:]
    if authority.count(":") == 1:
        return authority.split(":", 1)[0]
    return authority  # a bare IPv6 address, or no port


def _inet_aton(text: str) -> int | None:
    """An IPv4 address in any inet_aton form (1 to 4 parts, decimal/octal/hex)."""
    parts = text.split(".")
    if not 1 <= len(parts) <= 4:
        return None
    numbers = []
    for part in parts:
        if part.startswith("0x"):
            base, digits = 16, part[2:]
        elif len(part) > 1 and part.startswith("0"):
            base, digits = 8, part[1:]
        else:
            base, digits = 10, part
        if not digits or any(c not in _DIGITS[base] for c in digits):
            return None
        numbers.append(int(digits, base))
    *leading, last = numbers
    if any(n > 255 for n in leading) or last >= _LAST_PART_LIMIT[len(parts)]:
        return None
    value = last
    for index, number in enumerate(leading):
        value |= number << (24 - 8 * index)
    return value


def is_loopback_host(name: str) -> bool:
    """`name` is a host without port (brackets around IPv6 allowed)."""
    name = name.strip().rstrip(".").lower()
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    if name == "localhost":
        return True
    ipv4 = _inet_aton(name)
    if ipv4 is not None:
        return ipv4 >> 24 == 127
    try:
        address = ipaddress.IPv6Address(name.split("%", 1)[0])
    except ValueError:
        return False
    mapped = address.ipv4_mapped
    return address.is_loopback or (mapped is not None and mapped.is_loopback)
