"""Store record batches in Kafka's on-disk layout, reopen the log dir, and read them back.

    python examples/partition_log.py [LOG_DIR]

Prints, as JSON, the files of the partition directory and the records read after reopening.
Without LOG_DIR a temporary directory is used.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from kafkapy.log import LogConfig, LogManager
from kafkapy.protocol.records import Records, build_record_batch


def main(log_dir: Path) -> dict[str, object]:
    logs = LogManager([log_dir], broker_id=0)
    log = logs.get_or_create("orders", 0, LogConfig(segment_bytes=200))
    for n in range(3):
        # In a broker, kafkapy.log.append validates a Produce request's batch and assigns its offsets.
        batch = build_record_batch([(b"order-%d" % n, b"shipped")], base_offset=log.log_end_offset)
        log.append(bytearray(batch))
    logs.close()  # flushes, checkpoints, marks the dir cleanly shut down

    reopened = LogManager([log_dir], broker_id=0)
    log = reopened.get_or_create("orders", 0)
    chunks = log.read(0, max_bytes=1 << 20).chunks
    records = Records(b"".join(bytes(chunk) for chunk in chunks)).records()
    summary = {
        "files": sorted(p.name for p in (log_dir / "orders-0").iterdir()),
        "records": [
            [r.offset, r.key.decode() if r.key else None, r.value.decode() if r.value else None]
            for r in records
        ],
        "log_end_offset": log.log_end_offset,
    }
    reopened.close()
    return summary


if __name__ == "__main__":
    if len(sys.argv) > 1:
        print(json.dumps(main(Path(sys.argv[1])), indent=2))
    else:
        with tempfile.TemporaryDirectory() as tmp:
            print(json.dumps(main(Path(tmp)), indent=2))
