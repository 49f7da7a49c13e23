"""A client connected to the cluster's controller, for the commands whose requests only the
controller applies (UpdateFeatures, AlterPartitionReassignments...): Metadata names it."""

from __future__ import annotations

import argparse

from kafkapy.client import ClientError, SimpleClient
from kafkapy.commands._security import client_options
from kafkapy.protocol.api_keys import ApiKey

__all__ = ["controller_client"]


def controller_client(args: argparse.Namespace, client_id: str) -> SimpleClient:
    """A client of ``args.bootstrap_server``'s controller (the bootstrap broker itself if Metadata
    does not name a broker it lists), logged in with ``--command-config``."""
    client = SimpleClient(args.bootstrap_server, args.timeout, client_id=client_id, **client_options(args))
    try:
        metadata = client.request(ApiKey.METADATA, 1, {"topics": []})
    except ClientError:
        client.close()
        raise
    controller = metadata["controller_id"]
    for broker in metadata["brokers"]:
        if broker["node_id"] == controller:
            if (broker["host"], broker["port"]) != (client.host, client.port):
                client.close()
                client = SimpleClient(f"{broker['host']}:{broker['port']}", args.timeout, client_id=client_id,
                                      **client_options(args))
            break
    return client
