"""Read a `stoke tune` sweep with TensorBoard's own event reader and its
HParams plugin's parsers: the experiment summary in the sweep's folder names
the space's keys and the metrics; each trial's folder holds a session start
with its values (as trials.csv has them) and a session end with its status.

usage: check_tune_hparams.py SWEEPDIR   (exit 0: all good; 1: a difference)
"""
import csv
import glob
import os
import sys

from tensorboard.backend.event_processing import event_accumulator as ea
from tensorboard.plugins.hparams import api_pb2, metadata

sweep = sys.argv[1]
problems = []


def plugin_contents(run):
    acc = ea.EventAccumulator(run, size_guidance={ea.TENSORS: 0})
    acc.Reload()
    return {tag: acc.SummaryMetadata(tag).plugin_data.content for tag in acc.Tags()["tensors"]
            if acc.SummaryMetadata(tag).plugin_data.plugin_name == metadata.PLUGIN_NAME}


rows = list(csv.DictReader(open(os.path.join(sweep, "trials.csv"))))
keys = list(rows[0].keys())[2:list(rows[0].keys()).index("best_epoch") - 1]
exp = plugin_contents(sweep).get(metadata.EXPERIMENT_TAG)
if exp is None:
    problems.append("no experiment summary in " + sweep)
else:
    e = metadata.parse_experiment_plugin_data(exp)
    names = [h.name for h in e.hparam_infos]
    if names != keys:
        problems.append("experiment hparams %s, trials.csv %s" % (names, keys))
    tags = [m.name.tag for m in e.metric_infos]
    if "epoch/val_top1" not in tags:
        problems.append("metrics %s" % tags)
for r in rows:
    run = os.path.join(sweep, "trials", r["trial"])
    c = plugin_contents(run)
    start = c.get(metadata.SESSION_START_INFO_TAG)
    end = c.get(metadata.SESSION_END_INFO_TAG)
    if start is None or end is None:
        problems.append("trial %s: session start %s, end %s" % (r["trial"], start is not None,
                                                               end is not None))
        continue
    s = metadata.parse_session_start_info_plugin_data(start)
    for k in keys:
        v = s.hparams[k]
        got = v.number_value if v.WhichOneof("kind") == "number_value" else v.string_value
        want = float(r[k]) if v.WhichOneof("kind") == "number_value" else r[k]
        if got != want:
            problems.append("trial %s: %s = %r, trials.csv %r" % (r["trial"], k, got, want))
    status = metadata.parse_session_end_info_plugin_data(end).status
    want = api_pb2.STATUS_FAILURE if r["status"] == "ERROR" else api_pb2.STATUS_SUCCESS
    if status != want:
        problems.append("trial %s: status %d for %s" % (r["trial"], status, r["status"]))
print("\n".join(problems) if problems else "hparams ok: %d trials" % len(rows))
sys.exit(1 if problems else 0)
