"""Built-in KIP-388 observers: name them in ``observer.class.names``.

    AuditObserver    request counts and bytes per (principal, client id, API)
    CaptureObserver  every frame to a pcap file (``capture.path``)
    RequestHistory   the last requests per connection and their error codes (``request.history.size``)

For example ``observer.class.names=kafkapy.observers.AuditObserver,kafkapy.observers.CaptureObserver``.
The observer contract is in :mod:`kafkapy.server.observers`.
"""

from kafkapy.observers.audit import AuditObserver, AuditRow, TopicRow
from kafkapy.observers.capture import CaptureObserver
from kafkapy.observers.history import HistoryEntry, RequestHistory

__all__ = ["AuditObserver", "AuditRow", "CaptureObserver", "HistoryEntry", "RequestHistory", "TopicRow"]
