# Loaded by Python at start-up (PYTHONPATH points here) in an SDK child process: the only change
# to its world besides the test CA (the SDKs' own CA settings). The cloud host names resolve to
# the loopback stand-in; any other name fails to resolve and any connection off loopback fails,
# so nothing leaves the machine. It also lets the test move the clock forward: time
# passing is how an SDK decides to refresh.
import datetime as _datetime
import errno
import ipaddress
import os
import socket
import sys
import time as _time

_ADDRESS = os.environ.get("WIW_SDK_STANDIN_ADDRESS")
_HOSTS = {h for h in os.environ.get("WIW_SDK_STANDIN_HOSTS", "").split(",") if h}

_system_getaddrinfo = socket.getaddrinfo


def _is_ip(host):
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return False


def _getaddrinfo(host, port, family=0, type=0, proto=0, flags=0):
    name = host.decode() if isinstance(host, bytes) else host
    if name is None or _is_ip(name) or name == "localhost":
        return _system_getaddrinfo(host, port, family, type, proto, flags)
    if name.lower().rstrip(".") in _HOSTS:
        if isinstance(port, str):
            port = socket.getservbyname(port) if not port.isdigit() else int(port)
        return [(socket.AF_INET, type or socket.SOCK_STREAM, proto or socket.IPPROTO_TCP, "", (_ADDRESS, port or 0))]
    sys.stderr.write("redirect: refused to resolve %s\n" % name)
    raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")


def _check_address(address):
    if isinstance(address, tuple) and address and isinstance(address[0], str) and _is_ip(address[0]):
        if not ipaddress.ip_address(address[0]).is_loopback:
            sys.stderr.write("redirect: blocked a connection to %s\n" % address[0])
            # What a host without a route there sees.
            raise OSError(errno.ENETUNREACH, "Network is unreachable (blocked off loopback): %s" % address[0])


_system_connect = socket.socket.connect
_system_connect_ex = socket.socket.connect_ex


def _connect(self, address):
    _check_address(address)
    return _system_connect(self, address)


def _connect_ex(self, address):
    _check_address(address)
    return _system_connect_ex(self, address)


if _ADDRESS and _HOSTS:
    socket.getaddrinfo = _getaddrinfo
    socket.socket.connect = _connect
    socket.socket.connect_ex = _connect_ex


# The clock: advance_clock(seconds) makes time.time() and datetime.now()/utcnow() run ahead.
_offset = 0.0
_system_time = _time.time
_SystemDatetime = _datetime.datetime


class _DatetimeType(type):
    # Datetimes made before the switch (or by C code) stay instances of datetime.datetime.
    def __instancecheck__(cls, obj):
        return isinstance(obj, _SystemDatetime)

    def __subclasscheck__(cls, sub):
        return issubclass(sub, _SystemDatetime)


class _ShiftedDatetime(_SystemDatetime, metaclass=_DatetimeType):
    @classmethod
    def now(cls, tz=None):
        return _SystemDatetime.now(tz) + _datetime.timedelta(seconds=_offset)

    @classmethod
    def utcnow(cls):
        return _SystemDatetime.now(_datetime.timezone.utc).replace(tzinfo=None) + _datetime.timedelta(seconds=_offset)

    @classmethod
    def today(cls):
        return cls.now()


def advance_clock(seconds):
    global _offset
    _offset += seconds
    _time.time = lambda: _system_time() + _offset
    _datetime.datetime = _ShiftedDatetime
