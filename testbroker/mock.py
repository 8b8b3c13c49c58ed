"""ctypes binding to librdkafka's mock cluster, from the librdkafka bundled with confluent-kafka.

The mock cluster is an experimental librdkafka API (``rdkafka_mock.h``) with no ABI promise, so
only the handful of calls we need are bound, each with its exact C signature. The cluster lives
in the process that creates it; ``nines broker`` is that process, never a client.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import importlib.util
import os
from pathlib import Path
from types import TracebackType

RD_KAFKA_PRODUCER = 0
RD_KAFKA_CONF_OK = 0
_ERRSTR_LEN = 512


class MockError(RuntimeError):
    """A librdkafka mock call failed; the message carries librdkafka's own error text."""


def library_path() -> Path:
    """Path of the librdkafka shared library bundled with confluent-kafka (or the system one)."""
    spec = importlib.util.find_spec("confluent_kafka")
    if spec is not None and spec.origin is not None:
        site = Path(spec.origin).parent.parent
        found = sorted(glob.glob(str(site / "confluent_kafka.libs" / "librdkafka*.so*")))
        if found:
            return Path(found[0])
    env = os.environ.get("NINES_LIBRDKAFKA")
    if env:
        return Path(env)
    system = ctypes.util.find_library("rdkafka")
    if system:
        return Path(system)
    raise MockError("librdkafka not found: install confluent-kafka or set NINES_LIBRDKAFKA")


def _bind(lib: ctypes.CDLL) -> ctypes.CDLL:
    """Declare argument and return types so ctypes never guesses (pointers are 64-bit)."""
    vp, cp, i32, err = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int32, ctypes.c_int
    sigs: dict[str, tuple[list[type], type | None]] = {
        "rd_kafka_version_str": ([], cp),
        "rd_kafka_err2str": ([err], cp),
        "rd_kafka_conf_new": ([], vp),
        "rd_kafka_conf_set": ([vp, cp, cp, cp, ctypes.c_size_t], ctypes.c_int),
        "rd_kafka_conf_destroy": ([vp], None),
        "rd_kafka_new": ([ctypes.c_int, vp, cp, ctypes.c_size_t], vp),
        "rd_kafka_destroy": ([vp], None),
        "rd_kafka_mock_cluster_new": ([vp, ctypes.c_int], vp),
        "rd_kafka_mock_cluster_destroy": ([vp], None),
        "rd_kafka_mock_cluster_bootstraps": ([vp], cp),
        "rd_kafka_mock_topic_create": ([vp, cp, ctypes.c_int, ctypes.c_int], err),
        "rd_kafka_mock_partition_set_leader": ([vp, cp, i32, i32], err),
        "rd_kafka_mock_broker_set_rtt": ([vp, i32, ctypes.c_int], err),
        "rd_kafka_mock_broker_set_down": ([vp, i32], err),
        "rd_kafka_mock_broker_set_up": ([vp, i32], err),
        "rd_kafka_mock_broker_set_host_port": ([vp, i32, cp, ctypes.c_int], None),
        "rd_kafka_mock_broker_add": ([vp, i32], err),
        "rd_kafka_mock_set_controller_id": ([vp, i32], err),
    }
    for name, (argtypes, restype) in sigs.items():
        fn = getattr(lib, name)
        fn.argtypes = argtypes
        fn.restype = restype
    return lib


_LIB: ctypes.CDLL | None = None


def lib() -> ctypes.CDLL:
    """The loaded, typed librdkafka (loaded once per process)."""
    global _LIB
    if _LIB is None:
        _LIB = _bind(ctypes.CDLL(str(library_path())))
    return _LIB


def version() -> str:
    """librdkafka version string of the bound library."""
    return (lib().rd_kafka_version_str() or b"?").decode()


class MockCluster:
    """A librdkafka mock cluster of ``brokers`` brokers (ids 1..N) owned by a private producer."""

    def __init__(self, brokers: int, log_level: int = 3) -> None:
        if brokers < 1:
            raise MockError(f"brokers must be >= 1 (got {brokers})")
        self.brokers = brokers
        rd = lib()
        errstr = ctypes.create_string_buffer(_ERRSTR_LEN)
        conf = rd.rd_kafka_conf_new()
        # The owning producer never connects anywhere; keep its log quiet and its name obvious.
        for key, value in (("client.id", "nines-broker"), ("log_level", str(log_level))):
            rc = rd.rd_kafka_conf_set(conf, key.encode(), value.encode(), errstr, _ERRSTR_LEN)
            if rc != RD_KAFKA_CONF_OK:
                rd.rd_kafka_conf_destroy(conf)
                raise MockError(f"conf {key}: {errstr.value.decode()}")
        rk = rd.rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, _ERRSTR_LEN)
        if not rk:
            rd.rd_kafka_conf_destroy(conf)
            raise MockError(f"rd_kafka_new: {errstr.value.decode()}")
        self._rk: int | None = rk
        mc = rd.rd_kafka_mock_cluster_new(rk, brokers)
        if not mc:
            rd.rd_kafka_destroy(rk)
            self._rk = None
            raise MockError("rd_kafka_mock_cluster_new failed (see librdkafka log on stderr)")
        self._mc: int | None = mc

    def _handle(self) -> int:
        if self._mc is None:
            raise MockError("mock cluster already destroyed")
        return self._mc

    def _check(self, rc: int, what: str) -> None:
        if rc != 0:
            raise MockError(f"{what}: {lib().rd_kafka_err2str(rc).decode()}")

    def _broker(self, broker: int, *, allow_all: bool = True) -> int:
        if broker == -1 and allow_all:
            return -1
        if not 1 <= broker <= self.brokers:
            raise MockError(f"broker must be 1..{self.brokers} (got {broker})")
        return broker

    @property
    def bootstraps(self) -> str:
        """Comma-separated host:port list of the brokers' own listeners."""
        return lib().rd_kafka_mock_cluster_bootstraps(self._handle()).decode()

    def create_topic(self, topic: str, partitions: int, replication_factor: int = 1) -> None:
        """Create ``topic`` (the mock has no CreateTopics admin API, so this is the only way)."""
        if partitions < 1:
            raise MockError(f"partitions must be >= 1 (got {partitions})")
        rf = min(replication_factor, self.brokers)
        rc = lib().rd_kafka_mock_topic_create(self._handle(), topic.encode(), partitions, rf)
        self._check(rc, f"create topic {topic}")

    def set_leader(self, topic: str, partition: int, broker: int) -> None:
        """Move a partition's leader to ``broker`` (-1 makes it leaderless)."""
        rc = lib().rd_kafka_mock_partition_set_leader(
            self._handle(), topic.encode(), partition, self._broker(broker)
        )
        self._check(rc, f"set leader {topic}[{partition}]")

    def set_rtt(self, broker: int, rtt_ms: int) -> None:
        """Delay every response of ``broker`` (-1: all) by ``rtt_ms``."""
        if rtt_ms < 0:
            raise MockError(f"rtt must be >= 0 ms (got {rtt_ms})")
        rc = lib().rd_kafka_mock_broker_set_rtt(self._handle(), self._broker(broker), rtt_ms)
        self._check(rc, f"set rtt broker {broker}")

    def set_down(self, broker: int) -> None:
        """Disconnect ``broker``'s clients and refuse new ones (no leader change)."""
        self._check(
            lib().rd_kafka_mock_broker_set_down(self._handle(), self._broker(broker)),
            f"down broker {broker}",
        )

    def set_up(self, broker: int) -> None:
        """Let ``broker`` accept connections again."""
        self._check(
            lib().rd_kafka_mock_broker_set_up(self._handle(), self._broker(broker)),
            f"up broker {broker}",
        )

    def add_broker(self) -> int:
        """A broker joins (id N+1); its id.

        The mock then re-places every partition's replicas over all brokers (leaders may move):
        callers that want the old leaders back set them again.
        """
        broker = self.brokers + 1
        self._check(lib().rd_kafka_mock_broker_add(self._handle(), broker), f"add broker {broker}")
        self.brokers = broker
        return broker

    def set_controller(self, broker: int) -> None:
        """Name ``broker`` the controller in Metadata; the mock has no admin API, so admin calls
        then fail at once (unsupported) instead of timing out waiting for a controller."""
        self._check(
            lib().rd_kafka_mock_set_controller_id(self._handle(), self._broker(broker)),
            f"set controller {broker}",
        )

    def set_advertised(self, broker: int, host: str, port: int) -> None:
        """Advertise ``host:port`` for ``broker`` in Metadata (used by the fixed-port forwarder)."""
        lib().rd_kafka_mock_broker_set_host_port(
            self._handle(), self._broker(broker, allow_all=False), host.encode(), port
        )

    def destroy(self) -> None:
        """Close every listener and free the cluster and its owning handle."""
        rd = lib()
        if self._mc is not None:
            rd.rd_kafka_mock_cluster_destroy(self._mc)
            self._mc = None
        if self._rk is not None:
            rd.rd_kafka_destroy(self._rk)
            self._rk = None

    def __enter__(self) -> MockCluster:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.destroy()
