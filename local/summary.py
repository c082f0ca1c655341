"""The end of a local run: what was made, how training went, where everything is."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from infra.training_code import training_module
from local.folder_store import FolderStore

TRAIN_LINE = re.compile(r"\[train\] step=(\d+) loss=([0-9.eE+-]+)")
VALID_LINE = re.compile(
    r"\[(valid|valid_split)\] step=(\d+) val_loss=(\S+) val_loss_se=(\S+) val_ppl=(\S+) sequences=(\d+)"
    r"(?: val_bpb=(\S+) val_bpb_se=(\S+))?"
)
VERDICT_LINE = re.compile(r"\[verdict\] (.+)$")
STEP_LINE = re.compile(r"\[(?:train|stopped)\] step=(\d+) ")
START_LINE = re.compile(r"\[config\] .* start_step=(\d+) ")


def training_log(execution_dir: Path, job_name: str, attempt: str = "logs") -> list[str]:
    """The chief's log (``algo-1``, or ``localhost`` where hosts are plain processes); ``attempt``: ``interrupted``
    for the attempt a spot interruption stopped."""
    logs = sorted((execution_dir / "jobs" / job_name / attempt).glob("*.log"))
    return logs[0].read_text().splitlines() if logs else []


def spot_interruption(execution_dir: Path, job: dict[str, Any], lines: list[str]) -> str | None:
    """Steps lost to a spot interruption (trained before it, beyond where the restart resumed), and the times."""
    before = training_log(execution_dir, job["TrainingJobName"], "interrupted")
    if not before:
        return None
    done = max(int(m[1]) for m in map(STEP_LINE.search, before) if m)
    resumed = next(int(m[1]) for m in map(START_LINE.search, lines) if m)
    return (
        f"interrupted after step {done}, resumed at step {resumed}: {done - resumed} steps lost; training "
        f"{job['TrainingTimeInSeconds']} s, billed {job['BillableTimeInSeconds']} s per instance"
    )


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
        f"  {label:15s}loss {m[3]} ± {m[4]} (standard error), perplexity {m[5]}, "
        + (f"{m[7]} ± {m[8]} bits per byte, " if m[7] else "")
        + f"{int(m[6]):,} sequences at step {m[2]}"
        for tag, label in (("valid", "Validation"), ("valid_split", "  whole split"))
        if (m := last.get(tag))
    ]


def _source_field(line: str, name: str, key: str) -> str:
    """The value of ``<name>_<key>=`` in a log line (a source's), "?" when it has none."""
    found = re.search(rf" {name}_{key}=(\S+)", line)
    return found[1] if found else "?"


def mix_figures(lines: list[str], plan: dict[str, Any]) -> list[str]:
    """A mix's sources: each one's share as planned, its sequences and epochs as trained (the [config] line), and
    its last loss and bits per byte over its whole validation split."""
    rows = plan["summary"].get("mix_sources", [])
    if not rows:
        return []
    config = next((line for line in lines if "[config]" in line), "")
    split = next((line for line in reversed(lines) if "[valid_split]" in line), "")
    report = [f"  Mix            {plan['summary']['mix']}"]
    for row in rows:
        key = training_module("hparams").metric_key(row["name"])
        sequences, epochs = (_source_field(config, name, key) for name in ("sequences", "epochs"))
        loss, bpb, se = (_source_field(split, name, key) for name in ("val_loss", "val_bpb", "val_bpb_se"))
        report.append(
            f"    {row['name']:13s}{sequences} sequences ({epochs} epochs) trained; whole split loss {loss}, {bpb} ± "
            f"{se} bits per byte"
        )
    return report


def dataset_totals(store: FolderStore, dataset_uri: str) -> dict[str, Any]:
    totals = {"tokens": 0, "train_tokens": 0, "documents": 0, "skipped": {}}
    for uri, _ in store.list(dataset_uri + "manifests/"):
        part = json.loads(store.path(uri).read_text())
        totals["tokens"] += part.get("totals", {}).get("tokens_written", 0)
        totals["train_tokens"] += part.get("totals", {}).get("train_tokens", 0)
        totals["documents"] += part.get("documents_read", 0)
        for reason, count in part.get("documents_skipped", {}).items():
            totals["skipped"][reason] = totals["skipped"].get(reason, 0) + count
    return totals


def loss_gap(train_loss: float, valid_loss: float, trained_tokens: int, train_split_tokens: int, dropout: float):
    """Why the last training and validation losses differ, when they do by more than 5%; None when close.

    Training above validation: its figure is the mean over the last logging window (earlier, worse steps in
    it) with dropout on, validation is one evaluation at the window's end without it. Validation above
    training: the model saw the training split more than once and fits it better than text it never saw.
    """
    if abs(valid_loss - train_loss) <= 0.05 * train_loss:
        return None
    epochs = trained_tokens / train_split_tokens if train_split_tokens else 0.0
    if valid_loss > train_loss:
        if epochs > 1:
            return (
                f"validation {valid_loss - train_loss:.2f} above training: training read its {train_split_tokens:,} "
                f"tokens {epochs:.1f} times and fits them better than the held-out documents (more data, or "
                "fewer train_tokens, narrows it)"
            )
        return (
            f"validation {valid_loss - train_loss:.2f} above training: the held-out documents differ from the "
            "training ones more than the model has learnt to generalise yet"
        )
    return (
        f"training {train_loss - valid_loss:.2f} above validation: the training figure is the mean of the last "
        "logging window, steps taken before the model improved to where validation measured it"
        + (f", with dropout {dropout:g} on" if dropout else "")
    )


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
    report += mix_figures(lines, plan)
    valid = [float(m[3]) for m in map(VALID_LINE.search, lines) if m]  # the whole split's last, where it ran
    hyperparameters = plan["requests"]["training"]["HyperParameters"]
    trained = plan["summary"]["steps"] * json.loads(hyperparameters["global_batch_tokens"])
    dropout = float(json.loads(hyperparameters.get("dropout", "0")))
    if train and valid and (gap := loss_gap(train[-1], valid[-1], trained, totals["train_tokens"], dropout)):
        report.append(f"  Loss gap       {gap}")
    report += [
        f"  Model archive  {store.path(output['training']['Job']['ModelArtifacts']['S3ModelArtifacts'])}",
        f"  Tokenizer      {store.path(plan['dataset_uri'] + 'tokenizer.json')}",
        f"  Checkpoints    {store.path(plan['checkpoint_uri'])}",
    ]
    if curve:
        report.append(f"  Loss curve     {curve}")
    interruption = spot_interruption(execution_dir, output["training"]["Job"], lines)
    if interruption:
        report.append(f"  Spot           {interruption}")
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
