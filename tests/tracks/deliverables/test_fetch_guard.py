"""The deliverables fetch guard allows only globally routable addresses (issue 33): carrier-grade
NAT (a cloud's metadata service at 100.100.100.200), 6to4 of 169.254.169.254 and site-local
fec0::1 were let through; every IPv6 form carrying an IPv4 address is judged by what it carries;
every redirect hop and every address a name resolves to is checked. No network: names resolve
through an injected resolver, refused addresses are refused before any connection, and the only
server reached is a local double on 127.0.0.1, let through by the test's own rule."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from typing import Any

import pytest

from deskbench.tracks.deliverables.web_backend import WebError
from deskbench.tracks.deliverables.web_live import BraveSearch, IpAddress, LiveWeb, private_address
from tests.brave_double import BraveDouble

pytest.importorskip("aiohttp")

DOUBLE = ipaddress.ip_address("127.0.0.1")


def teredo(server: str, client: str) -> str:
    """A Teredo address (2001::/32): the server's IPv4, flags, port, then the client's IPv4 XOR-ed."""
    s, c = int(ipaddress.IPv4Address(server)), int(ipaddress.IPv4Address(client)) ^ 0xFFFF_FFFF
    return str(ipaddress.IPv6Address((0x2001_0000 << 96) | (s << 64) | (0x8000_63BF << 32) | c))


# the rows: observed blocked=False before
TABLE_ROWS = ["100.64.0.1", "100.100.100.200", "2002:a9fe:a9fe::1", "fec0::1"]

# (address, refused): each IPv6 form carrying an IPv4, refused when the IPv4 is not global
WRAPPED = [
    ("::ffff:100.100.100.200", True), ("::ffff:8.8.8.8", False),  # IPv4-mapped
    ("::169.254.169.254", True), ("::8.8.8.8", False),  # IPv4-compatible (deprecated)
    ("::ffff:0:10.0.0.1", True), ("::ffff:0:8.8.8.8", False),  # IPv4-translated (SIIT)
    ("2002:a9fe:a9fe::1", True), ("2002:6440:0001::1", True), ("2002:0808:0808::1", False),  # 6to4
    (teredo("65.54.227.120", "169.254.169.254"), True),  # Teredo: a private client
    (teredo("10.0.0.1", "8.8.8.8"), True),  # Teredo: a private server
    (teredo("65.54.227.120", "8.8.8.8"), False),  # both global
    ("64:ff9b::a9fe:a9fe", True), ("64:ff9b::100.100.100.200", True), ("64:ff9b::808:808", False),  # NAT64
    ("64:ff9b:1::808:808", True),  # the local-use NAT64 prefix (RFC 8215) is never global
]

# neither wrapped nor in the table: still refused, or global and allowed
OTHERS = [
    ("224.0.0.1", True), ("239.255.255.250", True), ("ff0e::1", True), ("ff02::1", True),  # multicast
    ("127.0.0.1", True), ("10.1.2.3", True), ("169.254.169.254", True), ("0.0.0.0", True), ("::1", True),
    ("::", True), ("fe80::1", True), ("fc00::1", True), ("2001:db8::1", True), ("3fff::1", True),
    ("198.18.0.1", True), ("240.0.0.1", True), ("255.255.255.255", True), ("192.0.0.1", True),
    ("8.8.8.8", False), ("1.1.1.1", False), ("2606:4700:4700::1111", False), ("2a00:1450:4001:80b::200e", False),
]


@pytest.mark.parametrize("address", TABLE_ROWS)
def test_the_rows_of_the_table_are_refused(address: str) -> None:
    assert private_address(ipaddress.ip_address(address))
    host = f"[{address}]" if ":" in address else address
    guarded = LiveWeb(BraveSearch(key="k"), timeout=5.0)
    with pytest.raises(WebError, match="local or private address"):  # before any connection
        asyncio.run(_fetch_and_close(guarded, f"http://{host}/latest/meta-data/"))


@pytest.mark.parametrize(("address", "refused"), WRAPPED + OTHERS)
def test_only_globally_routable_addresses_pass(address: str, refused: bool) -> None:
    assert private_address(ipaddress.ip_address(address)) is refused


class Names:
    """An aiohttp resolver answering from a table, no DNS: host -> addresses; counts the lookups."""

    def __init__(self, table: dict[str, list[str]]) -> None:
        self.table = table
        self.asked: list[str] = []

    async def resolve(self, host: str, port: int = 0, family: Any = socket.AF_INET) -> list[dict[str, Any]]:
        self.asked.append(host)
        return [{"hostname": host, "host": a, "port": port, "proto": 0, "flags": socket.AI_NUMERICHOST,
                 "family": socket.AF_INET6 if ":" in a else socket.AF_INET} for a in self.table[host]]

    async def close(self) -> None:
        return None


def _but_the_double(ip: IpAddress) -> bool:
    """The guard's own rule, except the local double standing for the public web."""
    return ip != DOUBLE and private_address(ip)


async def _fetch_and_close(web: LiveWeb, url: str) -> Any:
    try:
        return await web.fetch(url)
    finally:
        await web.aclose()


def test_a_redirect_hop_to_a_blocked_address_is_refused() -> None:
    with BraveDouble(pages={"/ok": (200, "text/html", b"<p>fine</p>")}) as double:
        port = double.url.rsplit(":", 1)[1]
        double.redirects.update({"/to-ok": "/ok", "/to-cgnat": f"http://100.100.100.200:{port}/ok",
                                 "/to-6to4": f"http://[2002:a9fe:a9fe::1]:{port}/ok",
                                 "/to-nat64": f"http://[64:ff9b::a9fe:a9fe]:{port}/ok",
                                 "/to-site-local": f"http://[fec0::1]:{port}/ok"})

        async def go() -> None:
            web = LiveWeb(BraveSearch(key="k"), blocked=_but_the_double, timeout=5.0)
            try:
                assert "fine" in (await web.fetch(double.url + "/to-ok")).text
                for hop in ("/to-cgnat", "/to-6to4", "/to-nat64", "/to-site-local"):
                    with pytest.raises(WebError, match="local or private address"):
                        await web.fetch(double.url + hop)
            finally:
                await web.aclose()

        asyncio.run(go())


def test_every_address_a_name_resolves_to_is_checked_and_connected_to() -> None:
    """A name with one blocked address among several is refused; a name that passes is connected to
    at the address checked (one lookup, through the guard: no second resolution to rebind)."""
    names = Names({"public.example": ["127.0.0.1"], "metadata.example": ["100.100.100.200"],
                   "mixed.example": ["127.0.0.1", "100.64.0.1"], "sixtofour.example": ["2002:a9fe:a9fe::1"]})
    with BraveDouble(pages={"/ok": (200, "text/html", b"<p>fine</p>")}) as double:
        port = double.url.rsplit(":", 1)[1]
        double.redirects.update({"/to-name": f"http://metadata.example:{port}/ok",
                                 "/to-public": f"http://public.example:{port}/ok"})

        async def go() -> None:
            web = LiveWeb(BraveSearch(key="k"), blocked=_but_the_double, resolver=names, timeout=5.0)
            try:
                assert "fine" in (await web.fetch(f"http://public.example:{port}/ok")).text
                assert "fine" in (await web.fetch(double.url + "/to-public")).text
                for url in (double.url + "/to-name", *(f"http://{n}:{port}/ok" for n in (
                        "metadata.example", "mixed.example", "sixtofour.example"))):
                    with pytest.raises(WebError, match=r"resolves to \S+, a local or private address"):
                        await web.fetch(url)  # one blocked address is enough
            finally:
                await web.aclose()

        asyncio.run(go())
        seen = [(p, h.get("host", "")) for p, h in double.requests]
    assert seen.count(("/ok", f"public.example:{port}")) == 2  # only the public name reached the page
    assert not any(h.startswith(("metadata", "mixed", "sixtofour")) for _, h in seen)
    assert set(names.asked) == {"public.example", "metadata.example", "mixed.example", "sixtofour.example"}
