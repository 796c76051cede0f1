"""Contains all the data models used in inputs/outputs"""

from .add_entries_json_body import AddEntriesJsonBody
from .add_entries_response_400 import AddEntriesResponse400
from .add_entries_response_401 import AddEntriesResponse401
from .add_entries_response_404 import AddEntriesResponse404
from .add_entries_response_409 import AddEntriesResponse409
from .add_entries_response_413 import AddEntriesResponse413
from .add_entries_response_503 import AddEntriesResponse503
from .add_entries_response_504 import AddEntriesResponse504
from .add_result import AddResult
from .admin_asset_response_400 import AdminAssetResponse400
from .admin_asset_response_404 import AdminAssetResponse404
from .admin_bookie import AdminBookie
from .admin_bookie_state import AdminBookieState
from .append_records_json_body import AppendRecordsJsonBody
from .append_records_response_400 import AppendRecordsResponse400
from .append_records_response_401 import AppendRecordsResponse401
from .append_records_response_404 import AppendRecordsResponse404
from .append_records_response_409 import AppendRecordsResponse409
from .append_records_response_413 import AppendRecordsResponse413
from .append_records_response_503 import AppendRecordsResponse503
from .append_records_response_504 import AppendRecordsResponse504
from .appended import Appended
from .attach_ledgers import AttachLedgers
from .attach_ledgers_response_400 import AttachLedgersResponse400
from .attach_ledgers_response_401 import AttachLedgersResponse401
from .attach_ledgers_response_404 import AttachLedgersResponse404
from .attach_ledgers_response_409 import AttachLedgersResponse409
from .attach_ledgers_response_503 import AttachLedgersResponse503
from .attach_result import AttachResult
from .audit_requested import AuditRequested
from .batch_add_result import BatchAddResult
from .batch_appended import BatchAppended
from .bookie_counts import BookieCounts
from .bookie_list import BookieList
from .close_ledger_response_400 import CloseLedgerResponse400
from .close_ledger_response_401 import CloseLedgerResponse401
from .close_ledger_response_404 import CloseLedgerResponse404
from .close_ledger_response_409 import CloseLedgerResponse409
from .close_ledger_response_503 import CloseLedgerResponse503
from .cluster import Cluster
from .commit_model import CommitModel
from .create_ledger import CreateLedger
from .create_ledger_metadata import CreateLedgerMetadata
from .create_ledger_response_400 import CreateLedgerResponse400
from .create_ledger_response_401 import CreateLedgerResponse401
from .create_ledger_response_503 import CreateLedgerResponse503
from .create_log import CreateLog
from .create_log_response_400 import CreateLogResponse400
from .create_log_response_401 import CreateLogResponse401
from .decommission_bookie_response_400 import DecommissionBookieResponse400
from .decommission_bookie_response_401 import DecommissionBookieResponse401
from .decommission_bookie_response_404 import DecommissionBookieResponse404
from .decommission_bookie_response_503 import DecommissionBookieResponse503
from .delete_ledger_response_400 import DeleteLedgerResponse400
from .delete_ledger_response_401 import DeleteLedgerResponse401
from .delete_ledger_response_404 import DeleteLedgerResponse404
from .delete_log_response_400 import DeleteLogResponse400
from .delete_log_response_401 import DeleteLogResponse401
from .delete_log_response_404 import DeleteLogResponse404
from .delete_log_response_503 import DeleteLogResponse503
from .disable_replication_response_401 import DisableReplicationResponse401
from .disable_replication_response_503 import DisableReplicationResponse503
from .enable_replication_response_401 import EnableReplicationResponse401
from .enable_replication_response_503 import EnableReplicationResponse503
from .entry import Entry
from .entry_page import EntryPage
from .fragment import Fragment
from .get_bookie_response_400 import GetBookieResponse400
from .get_bookie_response_401 import GetBookieResponse401
from .get_bookie_response_404 import GetBookieResponse404
from .get_bookie_response_503 import GetBookieResponse503
from .get_cluster_response_401 import GetClusterResponse401
from .get_cluster_response_503 import GetClusterResponse503
from .get_commit_response_400 import GetCommitResponse400
from .get_commit_response_401 import GetCommitResponse401
from .get_commit_response_404 import GetCommitResponse404
from .get_lac_response_400 import GetLacResponse400
from .get_lac_response_401 import GetLacResponse401
from .get_lac_response_404 import GetLacResponse404
from .get_lac_response_503 import GetLacResponse503
from .get_ledger_response_400 import GetLedgerResponse400
from .get_ledger_response_401 import GetLedgerResponse401
from .get_ledger_response_404 import GetLedgerResponse404
from .get_log_response_400 import GetLogResponse400
from .get_log_response_401 import GetLogResponse401
from .get_log_response_404 import GetLogResponse404
from .health_response_503 import HealthResponse503
from .lac import Lac
from .ledger import Ledger
from .ledger_list import LedgerList
from .ledger_metadata import LedgerMetadata
from .list_bookies_response_401 import ListBookiesResponse401
from .list_bookies_response_503 import ListBookiesResponse503
from .list_ledgers_response_400 import ListLedgersResponse400
from .list_ledgers_response_401 import ListLedgersResponse401
from .list_logs_response_400 import ListLogsResponse400
from .list_logs_response_401 import ListLogsResponse401
from .list_under_replicated_response_400 import ListUnderReplicatedResponse400
from .list_under_replicated_response_401 import ListUnderReplicatedResponse401
from .list_under_replicated_response_503 import ListUnderReplicatedResponse503
from .log_list import LogList
from .log_model import LogModel
from .position_model import PositionModel
from .read_entries_response_400 import ReadEntriesResponse400
from .read_entries_response_401 import ReadEntriesResponse401
from .read_entries_response_404 import ReadEntriesResponse404
from .read_entries_response_503 import ReadEntriesResponse503
from .read_entry_response_400 import ReadEntryResponse400
from .read_entry_response_401 import ReadEntryResponse401
from .read_entry_response_404 import ReadEntryResponse404
from .read_entry_response_503 import ReadEntryResponse503
from .read_records_response_400 import ReadRecordsResponse400
from .read_records_response_401 import ReadRecordsResponse401
from .read_records_response_404 import ReadRecordsResponse404
from .read_records_response_503 import ReadRecordsResponse503
from .record_model import RecordModel
from .record_page import RecordPage
from .recover_ledger_response_400 import RecoverLedgerResponse400
from .recover_ledger_response_401 import RecoverLedgerResponse401
from .recover_ledger_response_404 import RecoverLedgerResponse404
from .recover_ledger_response_503 import RecoverLedgerResponse503
from .recover_ledger_response_504 import RecoverLedgerResponse504
from .request_audit_response_401 import RequestAuditResponse401
from .request_audit_response_503 import RequestAuditResponse503
from .roll_log_response_400 import RollLogResponse400
from .roll_log_response_401 import RollLogResponse401
from .roll_log_response_404 import RollLogResponse404
from .roll_log_response_409 import RollLogResponse409
from .roll_log_response_503 import RollLogResponse503
from .rolled import Rolled
from .take_writer_response_400 import TakeWriterResponse400
from .take_writer_response_401 import TakeWriterResponse401
from .take_writer_response_404 import TakeWriterResponse404
from .take_writer_response_409 import TakeWriterResponse409
from .take_writer_response_503 import TakeWriterResponse503
from .take_writer_response_504 import TakeWriterResponse504
from .truncate_log_response_400 import TruncateLogResponse400
from .truncate_log_response_401 import TruncateLogResponse401
from .truncate_log_response_404 import TruncateLogResponse404
from .truncate_log_response_409 import TruncateLogResponse409
from .truncate_log_response_503 import TruncateLogResponse503
from .under_replicated_ledger import UnderReplicatedLedger
from .under_replicated_ledger_progress_type_0 import UnderReplicatedLedgerProgressType0
from .under_replicated_list import UnderReplicatedList
from .writer_model import WriterModel
from .writer_taken import WriterTaken

__all__ = (
    "AddEntriesJsonBody",
    "AddEntriesResponse400",
    "AddEntriesResponse401",
    "AddEntriesResponse404",
    "AddEntriesResponse409",
    "AddEntriesResponse413",
    "AddEntriesResponse503",
    "AddEntriesResponse504",
    "AddResult",
    "AdminAssetResponse400",
    "AdminAssetResponse404",
    "AdminBookie",
    "AdminBookieState",
    "Appended",
    "AppendRecordsJsonBody",
    "AppendRecordsResponse400",
    "AppendRecordsResponse401",
    "AppendRecordsResponse404",
    "AppendRecordsResponse409",
    "AppendRecordsResponse413",
    "AppendRecordsResponse503",
    "AppendRecordsResponse504",
    "AttachLedgers",
    "AttachLedgersResponse400",
    "AttachLedgersResponse401",
    "AttachLedgersResponse404",
    "AttachLedgersResponse409",
    "AttachLedgersResponse503",
    "AttachResult",
    "AuditRequested",
    "BatchAddResult",
    "BatchAppended",
    "BookieCounts",
    "BookieList",
    "CloseLedgerResponse400",
    "CloseLedgerResponse401",
    "CloseLedgerResponse404",
    "CloseLedgerResponse409",
    "CloseLedgerResponse503",
    "Cluster",
    "CommitModel",
    "CreateLedger",
    "CreateLedgerMetadata",
    "CreateLedgerResponse400",
    "CreateLedgerResponse401",
    "CreateLedgerResponse503",
    "CreateLog",
    "CreateLogResponse400",
    "CreateLogResponse401",
    "DecommissionBookieResponse400",
    "DecommissionBookieResponse401",
    "DecommissionBookieResponse404",
    "DecommissionBookieResponse503",
    "DeleteLedgerResponse400",
    "DeleteLedgerResponse401",
    "DeleteLedgerResponse404",
    "DeleteLogResponse400",
    "DeleteLogResponse401",
    "DeleteLogResponse404",
    "DeleteLogResponse503",
    "DisableReplicationResponse401",
    "DisableReplicationResponse503",
    "EnableReplicationResponse401",
    "EnableReplicationResponse503",
    "Entry",
    "EntryPage",
    "Fragment",
    "GetBookieResponse400",
    "GetBookieResponse401",
    "GetBookieResponse404",
    "GetBookieResponse503",
    "GetClusterResponse401",
    "GetClusterResponse503",
    "GetCommitResponse400",
    "GetCommitResponse401",
    "GetCommitResponse404",
    "GetLacResponse400",
    "GetLacResponse401",
    "GetLacResponse404",
    "GetLacResponse503",
    "GetLedgerResponse400",
    "GetLedgerResponse401",
    "GetLedgerResponse404",
    "GetLogResponse400",
    "GetLogResponse401",
    "GetLogResponse404",
    "HealthResponse503",
    "Lac",
    "Ledger",
    "LedgerList",
    "LedgerMetadata",
    "ListBookiesResponse401",
    "ListBookiesResponse503",
    "ListLedgersResponse400",
    "ListLedgersResponse401",
    "ListLogsResponse400",
    "ListLogsResponse401",
    "ListUnderReplicatedResponse400",
    "ListUnderReplicatedResponse401",
    "ListUnderReplicatedResponse503",
    "LogList",
    "LogModel",
    "PositionModel",
    "ReadEntriesResponse400",
    "ReadEntriesResponse401",
    "ReadEntriesResponse404",
    "ReadEntriesResponse503",
    "ReadEntryResponse400",
    "ReadEntryResponse401",
    "ReadEntryResponse404",
    "ReadEntryResponse503",
    "ReadRecordsResponse400",
    "ReadRecordsResponse401",
    "ReadRecordsResponse404",
    "ReadRecordsResponse503",
    "RecordModel",
    "RecordPage",
    "RecoverLedgerResponse400",
    "RecoverLedgerResponse401",
    "RecoverLedgerResponse404",
    "RecoverLedgerResponse503",
    "RecoverLedgerResponse504",
    "RequestAuditResponse401",
    "RequestAuditResponse503",
    "Rolled",
    "RollLogResponse400",
    "RollLogResponse401",
    "RollLogResponse404",
    "RollLogResponse409",
    "RollLogResponse503",
    "TakeWriterResponse400",
    "TakeWriterResponse401",
    "TakeWriterResponse404",
    "TakeWriterResponse409",
    "TakeWriterResponse503",
    "TakeWriterResponse504",
    "TruncateLogResponse400",
    "TruncateLogResponse401",
    "TruncateLogResponse404",
    "TruncateLogResponse409",
    "TruncateLogResponse503",
    "UnderReplicatedLedger",
    "UnderReplicatedLedgerProgressType0",
    "UnderReplicatedList",
    "WriterModel",
    "WriterTaken",
)
