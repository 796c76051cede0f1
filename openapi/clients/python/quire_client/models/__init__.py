"""Contains all the data models used in inputs/outputs"""

from .ack_cursor import AckCursor
from .add_entries_json_body import AddEntriesJsonBody
from .add_result import AddResult
from .admin_bookie import AdminBookie
from .admin_bookie_state import AdminBookieState
from .append_records_json_body import AppendRecordsJsonBody
from .appended import Appended
from .attach_ledgers import AttachLedgers
from .attach_result import AttachResult
from .audit_requested import AuditRequested
from .batch_add_result import BatchAddResult
from .batch_appended import BatchAppended
from .bookie_counts import BookieCounts
from .bookie_list import BookieList
from .cluster import Cluster
from .cluster_racks import ClusterRacks
from .commit_model import CommitModel
from .create_cursor import CreateCursor
from .create_cursor_start_type_1 import CreateCursorStartType1
from .create_ledger import CreateLedger
from .create_ledger_metadata import CreateLedgerMetadata
from .create_log import CreateLog
from .cursor_acked import CursorAcked
from .cursor_list import CursorList
from .cursor_model import CursorModel
from .drain_failure import DrainFailure
from .drained import Drained
from .entry import Entry
from .entry_page import EntryPage
from .error import Error
from .error_error import ErrorError
from .fragment import Fragment
from .gateway_entry import GatewayEntry
from .gateway_list import GatewayList
from .gc_freed_ledger import GcFreedLedger
from .gc_pass import GcPass
from .lac import Lac
from .ledger import Ledger
from .ledger_list import LedgerList
from .ledger_metadata import LedgerMetadata
from .log_list import LogList
from .log_model import LogModel
from .misplaced_ledger import MisplacedLedger
from .patch_log import PatchLog
from .placement_report import PlacementReport
from .placement_report_racks import PlacementReportRacks
from .position_model import PositionModel
from .record_model import RecordModel
from .record_page import RecordPage
from .retention_model import RetentionModel
from .rolled import Rolled
from .storage_bucket import StorageBucket
from .storage_by_log import StorageByLog
from .storage_gc_settings import StorageGcSettings
from .storage_last_pass import StorageLastPass
from .storage_ledger import StorageLedger
from .storage_live import StorageLive
from .storage_log_total import StorageLogTotal
from .storage_purging import StoragePurging
from .storage_report import StorageReport
from .under_replicated_ledger import UnderReplicatedLedger
from .under_replicated_ledger_progress_type_0 import UnderReplicatedLedgerProgressType0
from .under_replicated_list import UnderReplicatedList
from .usage_model import UsageModel
from .writer_model import WriterModel
from .writer_taken import WriterTaken

__all__ = (
    "AckCursor",
    "AddEntriesJsonBody",
    "AddResult",
    "AdminBookie",
    "AdminBookieState",
    "Appended",
    "AppendRecordsJsonBody",
    "AttachLedgers",
    "AttachResult",
    "AuditRequested",
    "BatchAddResult",
    "BatchAppended",
    "BookieCounts",
    "BookieList",
    "Cluster",
    "ClusterRacks",
    "CommitModel",
    "CreateCursor",
    "CreateCursorStartType1",
    "CreateLedger",
    "CreateLedgerMetadata",
    "CreateLog",
    "CursorAcked",
    "CursorList",
    "CursorModel",
    "Drained",
    "DrainFailure",
    "Entry",
    "EntryPage",
    "Error",
    "ErrorError",
    "Fragment",
    "GatewayEntry",
    "GatewayList",
    "GcFreedLedger",
    "GcPass",
    "Lac",
    "Ledger",
    "LedgerList",
    "LedgerMetadata",
    "LogList",
    "LogModel",
    "MisplacedLedger",
    "PatchLog",
    "PlacementReport",
    "PlacementReportRacks",
    "PositionModel",
    "RecordModel",
    "RecordPage",
    "RetentionModel",
    "Rolled",
    "StorageBucket",
    "StorageByLog",
    "StorageGcSettings",
    "StorageLastPass",
    "StorageLedger",
    "StorageLive",
    "StorageLogTotal",
    "StoragePurging",
    "StorageReport",
    "UnderReplicatedLedger",
    "UnderReplicatedLedgerProgressType0",
    "UnderReplicatedList",
    "UsageModel",
    "WriterModel",
    "WriterTaken",
)
