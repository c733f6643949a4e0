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
    from ._settings import PULSAR_DEFAULTS as PULSAR_DEFAULTS, write_settings as write_settings
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
    from ._watch import (
        AT_RISK as AT_RISK,
        ENTRIES as ENTRIES,
        LOSING_STATE as LOSING_STATE,
        MESSAGES as MESSAGES,
        OK as OK,
        STATUSES as STATUSES,
        SubscriptionWatch as SubscriptionWatch,
        Watch as Watch,
        WatchRound as WatchRound,
        WatchSettings as WatchSettings,
        forecast_crossing as forecast_crossing,
        namespace_of as namespace_of,
    )

# imported on first use (PEP 562): each command imports only what it runs (the report extra has
# no xxhash, which the prepared layout needs; a recording broker needs no generator)
_LAZY = {
    "._broker_model": ("BrokerModel",),
    "._capture": ("Capture", "CaptureSettings"),
    "._checks": ("check_input_dir", "check_output_dir"),
    "._explain": ("PartitionExplanation", "explain_replay", "format_explanations"),
    "._generate": ("PLANTED_ANOMALIES", "GeneratorConfig", "generate"),
    "._inputs": ("InputPlan", "plan_inputs"),
    "._layout": ("PreparedLayoutError", "PreparedLog", "is_prepared", "open_prepared"),
    "._local": ("run_single_process",),
    "._poll_events": (
        "Acked",
        "Anomaly",
        "CaptureEvent",
        "EntrySeen",
        "ObservedEntry",
        "SubscriptionCreated",
        "SubscriptionDeleted",
        "SubscriptionReset",
        "SubscriptionState",
    ),
    "._poller": ("ClusterPoller", "PollBudget", "PollerSettings", "PollSummary"),
    "._prepare": ("IN_PROCESS_ROWS", "prepare_in_process"),
    "._progress": ("Progress",),
    "._recording": ("Recorder", "RecordSettings", "read_recorded_rows", "read_recording_status"),
    "._store": ("add_repeated_entries",),
    "._summary": ("ReplaySummary", "SweepSummary", "format_event_time", "format_summary", "format_sweep", "summarize"),
    "._sweep": ("parse_sweep", "variants"),
    "._settings": ("PULSAR_DEFAULTS", "write_settings"),
    "._watch": (
        "AT_RISK",
        "ENTRIES",
        "MESSAGES",
        "LOSING_STATE",
        "OK",
        "STATUSES",
        "SubscriptionWatch",
        "Watch",
        "WatchRound",
        "WatchSettings",
        "forecast_crossing",
        "namespace_of",
    ),
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
