"""The end of a local run: what was made, how training went, where everything is."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from local.folder_store import FolderStore

TRAIN_LINE = re.compile(r"\[train\] step=(\d+) loss=([0-9.eE+-]+)")
VALID_LINE = re.compile(
    r"\[(valid|valid_split)\] step=(\d+) val_loss=(\S+) val_loss_se=(\S+) val_ppl=(\S+) sequences=(\d+)"
)
VERDICT_LINE = re.compile(r"\[verdict\] (.+)$")


def training_log(execution_dir: Path, job_name: str) -> list[str]:
    log = execution_dir / "jobs" / job_name / "logs" / "algo-1.log"
    return log.read_text().splitlines() if log.is_file() else []


def loss_curve(lines: list[str], path: Path) -> Path | None:
    """A PNG of training and validation loss against the step; None when there is nothing to draw."""
    train = [(int(m[1]), float(m[2])) for m in map(TRAIN_LINE.search, lines) if m]
    valid = [(int(m[2]), float(m[3])) for m in map(VALID_LINE.search, lines) if m and m[1] == "valid"]
    if not train:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4))
    axes.plot(*zip(*train, strict=True), label="training loss")
    if valid:
        axes.plot(*zip(*valid, strict=True), "o-", label="validation loss")
    axes.set(xlabel="step", ylabel="cross-entropy (nats)", title="Local run: GPT training loss")
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path


def validation_figures(lines: list[str]) -> list[str]:
    """The last evaluation of the fixed sample and the whole split's, each with its standard error."""
    last = {m[1]: m for m in map(VALID_LINE.search, lines) if m}
    return [
        f"  {label:15s}loss {m[3]} ± {m[4]} (standard error), perplexity {m[5]}, {int(m[6]):,} sequences at step {m[2]}"
        for tag, label in (("valid", "Validation"), ("valid_split", "  whole split"))
        if (m := last.get(tag))
    ]


def dataset_totals(store: FolderStore, dataset_uri: str) -> dict[str, Any]:
    totals = {"tokens": 0, "documents": 0, "skipped": {}}
    for uri, _ in store.list(dataset_uri + "manifests/"):
        part = json.loads(store.path(uri).read_text())
        totals["tokens"] += part.get("totals", {}).get("tokens_written", 0)
        totals["documents"] += part.get("documents_read", 0)
        for reason, count in part.get("documents_skipped", {}).items():
            totals["skipped"][reason] = totals["skipped"].get(reason, 0) + count
    return totals


def failure_message(result: dict[str, Any]) -> str:
    """The readable part of a failure: a Lambda's errorMessage or a job's FailureReason, else the raw cause."""
    cause = result.get("cause") or ""
    text = cause.split("error: ", 1)[-1] if cause.startswith("Execution has failed") else cause
    try:
        detail = json.loads(text)
    except ValueError:
        return text
    return detail.get("errorMessage") or detail.get("FailureReason") or text


def summarize(result: dict[str, Any], store: FolderStore, execution_dir: Path, seconds: float) -> str:
    if result["status"] != "SUCCEEDED":
        logs = execution_dir / "jobs"
        return f"\nExecution FAILED after {seconds:.0f} s: {failure_message(result)}\n  Jobs' logs: {logs}"
    output = result["output"]
    plan = output["plan"]
    lines = training_log(execution_dir, plan["names"]["training"])
    train = [float(m[2]) for m in map(TRAIN_LINE.search, lines) if m]
    samples = [line.split("[sample]", 1)[1].strip() for line in lines if "[sample]" in line]
    totals = dataset_totals(store, plan["dataset_uri"])
    curve = loss_curve(lines, execution_dir / "loss.png")
    report = [
        f"\nExecution SUCCEEDED in {seconds:.0f} s",
        f"  Model          {plan['summary']['model']}",
        f"  Dataset        {totals['tokens']:,} tokens from {totals['documents']:,} documents"
        + (f" (skipped: {totals['skipped']})" if totals["skipped"] else "")
        + ("" if plan["preprocess"]["run"] else " (existing dataset, preprocessing skipped)"),
    ]
    if train:
        report.append(f"  Training loss  {train[0]:.3f} at the first log line -> {train[-1]:.3f} at the last")
    report += validation_figures(lines)
    report += [
        f"  Model archive  {store.path(output['training']['Job']['ModelArtifacts']['S3ModelArtifacts'])}",
        f"  Tokenizer      {store.path(plan['dataset_uri'] + 'tokenizer.json')}",
        f"  Checkpoints    {store.path(plan['checkpoint_uri'])}",
    ]
    if curve:
        report.append(f"  Loss curve     {curve}")
    training_report = store.path(plan["training_report_uri"])
    if training_report.is_file():
        report.append(f"  Report         {training_report}")
    verdicts = [m[1] for m in map(VERDICT_LINE.search, lines) if m]
    report += [f"  Health         {verdict}" for verdict in verdicts]
    if samples:
        report.append(f"  Sample         {samples[-1][:300]!r}")
    if "deployment" in output:
        response = output["deployment"]["status"].get("Response")
        report.append(
            f"  Endpoint       {output['deployment']['status']['EndpointStatus']}: {json.dumps(response)[:300]}"
        )
    return "\n".join(report)
