"""The interceptor chain stepped in place (FastPaths.in_place_chain) held equal to the worker task.

The same conversation through the fault injector (a rule for an API never sent, one answering
DescribeCluster with an error, a Throttle), with the chain stepped in place and with the plain path:
the same bytes, and the in-place run makes no task until a request really waits (the mute).
"""

from __future__ import annotations

import asyncio
import socket

from server_wire import KafkaSocket

from kafkapy import Broker
from kafkapy.errors import ErrorCode
from kafkapy.faults import ErrorAnswer, FaultRule, Throttle
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.server.fastpaths import FastPaths

SOFTWARE = {"client_software_name": "applies-tests", "client_software_version": "1.0"}
METADATA = {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}
DESCRIBE_CLUSTER = {"include_cluster_authorized_operations": False}


async def has_worker(broker: Broker) -> bool:
    """Whether the broker's one connection has made its worker task (read on the loop)."""
    assert broker.runtime is not None
    (conn,) = broker.runtime.connections
    return conn.worker is not None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def conversation(fast_paths: FastPaths, port: int) -> tuple[list[bytes], list[bool]]:
    """Requests through three rules (one for an API never sent, one that answers DescribeCluster
    with an error, one that throttles every second Metadata by 300 ms); the answers' bytes after the
    correlation id, and after each request whether the connection had made a worker task."""
    answers, tasks = [], []
    config = {"broker.id": 5, "cluster.id": "applies-cluster", "listeners": f"PLAINTEXT://127.0.0.1:{port}"}
    with Broker(config, fast_paths=fast_paths) as b:
        b.faults.add(FaultRule(ErrorAnswer(ErrorCode.NOT_CONTROLLER), api=ApiKey.DELETE_TOPICS))
        b.faults.add(FaultRule(ErrorAnswer(ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
                               api=ApiKey.DESCRIBE_CLUSTER))
        b.faults.add(FaultRule(Throttle(300), api=ApiKey.METADATA, every=2))
        assert b.runtime is not None
        with KafkaSocket(b.bootstrap_servers) as s:
            for key, version, body in [(ApiKey.API_VERSIONS, 3, SOFTWARE), (ApiKey.METADATA, 12, METADATA),
                                       (ApiKey.DESCRIBE_CLUSTER, 0, DESCRIBE_CLUSTER),
                                       (ApiKey.METADATA, 12, METADATA), (ApiKey.METADATA, 12, METADATA),
                                       (ApiKey.API_VERSIONS, 3, SOFTWARE)]:
                s.send(key, version, body)
                answers.append(s.read_frame()[4:])
                tasks.append(asyncio.run_coroutine_threadsafe(has_worker(b), b.runtime.loop).result(5))
    return answers, tasks


def test_the_chain_stepped_in_place_answers_as_the_worker_task_and_takes_no_task() -> None:
    port = _free_port()
    fast, fast_tasks = conversation(FastPaths(), port)
    plain, plain_tasks = conversation(FastPaths(in_place_chain=False), port)
    assert fast == plain
    # Answered by a rule, throttled, or passed: in place, no task; the request behind the throttle
    # waits out the mute, and that takes the worker task.
    assert fast_tasks == [False, False, False, False, True, True]
    # The plain path: every request the injector applies to (all but the first) in the worker task.
    assert plain_tasks == [False, True, True, True, True, True]
