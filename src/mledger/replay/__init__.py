"""Replay of produced / acked / cancelled event logs through mledger's broker and cursors.

Nothing in this package imports pyspark; the Spark driver glue is :mod:`mledger.replay.spark`.

* :mod:`.schema`    input, event and output schemas, file and row checks
* :mod:`.inputs`    finding, checking and reading raw event logs
* :mod:`.generate`  ``mledger generate``: seeded synthetic logs, streamed to disk
* :mod:`.engine`    :class:`PartitionReplayer`: one topic-partition's events, vectorised
* :mod:`.columns`, :mod:`.entries`  the engine's event columns and produced-position index
* :mod:`.model`     the seam between the engine and the semantics it drives
* :mod:`.broker_model`, :mod:`.store`  that seam on ``mledger.broker`` (topic, subscriptions, dedup, delayed delivery)
* :mod:`.local`     the single-process replay
* :mod:`.settings`, :mod:`.summary`, :mod:`.events`  settings, the printed summary, hand-written logs for tests
* :mod:`.poller`, :mod:`.capture`  a live cluster's public APIs polled concurrently as events
  (:class:`ClusterPoller`), and ``mledger capture``, which writes them as a recording
* :mod:`.watch`     ``mledger watch``: the poller's events fed to a live replay (:class:`Watch`)
"""

from typing import TYPE_CHECKING

from ..core import lazy_getattr
from ._engine import (
    EventOrderError as EventOrderError,
    PartitionReplayer as PartitionReplayer,
    replayable as replayable,
)
from ._model import PartitionModel as PartitionModel, SubscriptionSpec as SubscriptionSpec
from ._schema import (
    CURSOR_SCHEMA as CURSOR_SCHEMA,
    REASONS as REASONS,
    REPORT_DIR as REPORT_DIR,
    InputSchemaError as InputSchemaError,
)
from ._settings import ReplaySettings as ReplaySettings

if TYPE_CHECKING:
    from ._broker_model import BrokerModel as BrokerModel
    from ._capture import Capture as Capture, CaptureSettings as CaptureSettings
    from ._checks import check_input_dir as check_input_dir, check_output_dir as check_output_dir
    from ._explain import (
        PartitionExplanation as PartitionExplanation,
        explain_replay as explain_replay,
        format_explanations as format_explanations,
    )
    from ._generate import (
        PLANTED_ANOMALIES as PLANTED_ANOMALIES,
        GeneratorConfig as GeneratorConfig,
        generate as generate,
    )
    from ._inputs import InputPlan as InputPlan, plan_inputs as plan_inputs
    from ._layout import (
        PreparedLayoutError as PreparedLayoutError,
        PreparedLog as PreparedLog,
        is_prepared as is_prepared,
        open_prepared as open_prepared,
    )
    from ._local import run_single_process as run_single_process
    from ._poll_events import (
        Acked as Acked,
        Anomaly as Anomaly,
        CaptureEvent as CaptureEvent,
        EntrySeen as EntrySeen,
        ObservedEntry as ObservedEntry,
        SubscriptionCreated as SubscriptionCreated,
        SubscriptionDeleted as SubscriptionDeleted,
        SubscriptionReset as SubscriptionReset,
        SubscriptionState as SubscriptionState,
    )
    from ._poller import (
        ClusterPoller as ClusterPoller,
        PollBudget as PollBudget,
        PollerSettings as PollerSettings,
        PollSummary as PollSummary,
    )
    from ._prepare import IN_PROCESS_ROWS as IN_PROCESS_ROWS, prepare_in_process as prepare_in_process
    from ._progress import Progress as Progress
    from ._recording import (
        Recorder as Recorder,
        RecordSettings as RecordSettings,
        read_recorded_rows as read_recorded_rows,
        read_recording_status as read_recording_status,
    )
    from ._store import add_repeated_entries as add_repeated_entries
    from ._summary import (
        ReplaySummary as ReplaySummary,
        SweepSummary as SweepSummary,
        format_event_time as format_event_time,
        format_summary as format_summary,
        format_sweep as format_sweep,
        summarize as summarize,
    )
    from ._sweep import parse_sweep as parse_sweep, variants as variants

# imported on first use (PEP 562): each command imports only what it runs (the report extra has
# no xxhash, which the prepared layout needs; a recording broker needs no generator)
_LAZY = {
    "BrokerModel": "._broker_model",
    "PartitionExplanation": "._explain",
    "explain_replay": "._explain",
    "format_explanations": "._explain",
    "Capture": "._capture",
    "CaptureSettings": "._capture",
    "GeneratorConfig": "._generate",
    "generate": "._generate",
    "PreparedLayoutError": "._layout",
    "PreparedLog": "._layout",
    "open_prepared": "._layout",
    "run_single_process": "._local",
    "Acked": "._poll_events",
    "Anomaly": "._poll_events",
    "CaptureEvent": "._poll_events",
    "EntrySeen": "._poll_events",
    "ObservedEntry": "._poll_events",
    "SubscriptionCreated": "._poll_events",
    "SubscriptionDeleted": "._poll_events",
    "SubscriptionReset": "._poll_events",
    "SubscriptionState": "._poll_events",
    "ClusterPoller": "._poller",
    "PollBudget": "._poller",
    "PollerSettings": "._poller",
    "PollSummary": "._poller",
    "prepare_in_process": "._prepare",
    "Recorder": "._recording",
    "RecordSettings": "._recording",
    "read_recorded_rows": "._recording",
    "read_recording_status": "._recording",
    "ReplaySummary": "._summary",
    "SweepSummary": "._summary",
    "format_summary": "._summary",
    "format_event_time": "._summary",
    "format_sweep": "._summary",
    "summarize": "._summary",
    "parse_sweep": "._sweep",
    "PULSAR_DEFAULTS": "._settings",
    "write_settings": "._settings",
    "AT_RISK": "._watch",
    "ENTRIES": "._watch",
    "MESSAGES": "._watch",
    "LOSING_STATE": "._watch",
    "OK": "._watch",
    "STATUSES": "._watch",
    "SubscriptionWatch": "._watch",
    "Watch": "._watch",
    "WatchRound": "._watch",
    "WatchSettings": "._watch",
    "forecast_crossing": "._watch",
    "namespace_of": "._watch",
    "IN_PROCESS_ROWS": "._prepare",
    "InputPlan": "._inputs",
    "PLANTED_ANOMALIES": "._generate",
    "Progress": "._progress",
    "check_input_dir": "._checks",
    "check_output_dir": "._checks",
    "is_prepared": "._layout",
    "plan_inputs": "._inputs",
    "variants": "._sweep",
    "add_repeated_entries": "._store",
}

__getattr__ = lazy_getattr(__name__, _LAZY, globals())

__all__ = [
    "AT_RISK",
    "Acked",
    "Anomaly",
    "BrokerModel",
    "Capture",
    "CaptureEvent",
    "CaptureSettings",
    "ClusterPoller",
    "ENTRIES",
    "EntrySeen",
    "EventOrderError",
    "GeneratorConfig",
    "InputSchemaError",
    "LOSING_STATE",
    "MESSAGES",
    "OK",
    "ObservedEntry",
    "PULSAR_DEFAULTS",
    "PartitionExplanation",
    "PartitionModel",
    "PartitionReplayer",
    "PollBudget",
    "PollSummary",
    "PollerSettings",
    "PreparedLayoutError",
    "PreparedLog",
    "RecordSettings",
    "Recorder",
    "ReplaySettings",
    "ReplaySummary",
    "STATUSES",
    "SubscriptionCreated",
    "SubscriptionDeleted",
    "SubscriptionReset",
    "SubscriptionSpec",
    "SubscriptionState",
    "SubscriptionWatch",
    "SweepSummary",
    "Watch",
    "WatchRound",
    "WatchSettings",
    "add_repeated_entries",
    "explain_replay",
    "forecast_crossing",
    "format_event_time",
    "format_explanations",
    "format_summary",
    "format_sweep",
    "generate",
    "namespace_of",
    "open_prepared",
    "parse_sweep",
    "prepare_in_process",
    "read_recorded_rows",
    "read_recording_status",
    "run_single_process",
    "summarize",
    "write_settings",
]
