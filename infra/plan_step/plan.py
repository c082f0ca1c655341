"""The Plan step: validate the execution input, decide what to run, and build every request.

``plan_execution`` is pure apart from the object store it is given (S3 in AWS, a folder locally).
Its result lands at ``$.plan`` of the execution; the states read their requests from there.
"""

from __future__ import annotations

import json
from typing import Any

from infra.config import ConfigError
from infra.estimate import checkpoint
from infra.estimate.estimate import estimate_for_config
from infra.estimate.layouts import least_recompute
from infra.plan_step import mix, processing_requests, requests
from infra.plan_step.deployment import check_deploy_from, trained_earlier
from infra.plan_step.execution_input import CORPUS_SUFFIXES, InputError, WorkflowInput, parse_input
from infra.plan_step.hyperparameters import check_hyperparameters
from infra.plan_step.names import resource_names
from infra.plan_step.object_store import ObjectStore
from infra.plan_step.quotas import QuotaSource, needed_quotas, quota_problem
from infra.plan_step.runs import check_run, run_record, run_record_uri
from infra.plan_step.settings import StackSettings
from infra.plan_step.sources import (
    check_buckets,
    check_corpus_given,
    check_corpus_readable,
    check_given_tokenizer,
    check_reuse,
    corpus_sources,
    dataset_source,
    source_record_uri,
)
from infra.training_code import ModelShape, recipe_summary, training_module


def check_input(raw_input: Any, settings: StackSettings) -> tuple[WorkflowInput, Any]:
    """The Plan step's checks that need no object store, in its order (also ``python -m cli validate``'s): every
    field of the input, every hyperparameter the job would get, the buckets it reads. Returns the input and the
    ``contract/recipe.py`` ``Recipe`` its hyperparameters make; raises InputError naming the bad field."""
    try:
        inp = parse_input(raw_input, settings.stage_config)
        recipe = check_hyperparameters(settings, inp)
        check_buckets(settings, inp)
    except ConfigError as error:
        raise InputError(str(error)) from error
    return inp, recipe


def plan_execution(
    raw_input: Any,
    execution_name: str,
    settings: StackSettings,
    store: ObjectStore,
    quotas: QuotaSource | None = None,
) -> dict[str, Any]:
    """Returns the plan the state machine follows; raises InputError with a message naming the bad field.

    ``quotas``: where the account's SageMaker quotas are read (the Lambda's Service Quotas, the local run's fake);
    every quota the execution will use is checked against it last, once the requests exist. None checks none (the
    unit tests of the requests)."""
    inp, recipe = check_input(raw_input, settings)
    names = resource_names(settings.job_prefix, execution_name, settings.stack_creation)
    run_name = inp.run_name or execution_name
    if {".", ".."} & set(run_name.split("/")):  # Step Functions accepts "..": s3://checkpoints/../ leaves the run
        shown = training_module("hparams").shown(execution_name)
        raise InputError(
            "run_name: None is not valid; expected a run_name (letters, digits, '.', '_' or '-', starting with a "
            f"letter or digit): the execution's name {shown} cannot name the checkpoint folder"
        )

    train = inp.deploy_from is None  # else the stage's endpoint serves an earlier job's model, nothing more
    manifests = [uri for uri, _ in store.list(requests.dataset_uri(settings, inp) + "manifests/")]
    dataset_ready = bool(manifests)
    preprocess = train and (inp.force_preprocess or not dataset_ready)
    tokenizer_ready = bool(inp.dataset.tokenizer_s3_uri) or bool(store.list(requests.tokenizer_dir_uri(settings, inp)))
    train_tokenizer = preprocess and not tokenizer_ready
    try:
        check_deploy_from(settings, inp, store)
        if preprocess:
            check_corpus_given(settings, inp)
        if train:
            check_given_tokenizer(inp, store)
        if train and not preprocess:
            check_reuse(settings, inp, store, manifests)
    except ConfigError as error:
        raise InputError(str(error)) from error
    corpus, unsupported = _corpus_files(settings, inp, store) if preprocess else ({}, [])
    if train:
        check_run(settings, inp, run_name, store)
    trained_job = names["training"] if train else inp.deploy_from
    deploy = inp.deploy.enabled or not train
    samples = f"s3://{settings.datasets_bucket}/inputs/{names['tokenizer']}/tokenizer-sample"
    sources = [source for _, source in corpus_sources(settings, inp)]
    sample_manifests = {s.name: f"{samples}{'-' + s.name if s.name else ''}.manifest" for s in sources}
    plan_requests = {
        "tokenizer": processing_requests.tokenizer_job_request(settings, inp, names["tokenizer"], sample_manifests),
        "shards": processing_requests.shards_job_request(settings, inp, names["shards"]),
        "training": requests.training_job_request(settings, inp, names["training"], run_name),
        "model": requests.model_request(settings, inp, names["model"], trained_job),
        "endpoint_config": requests.endpoint_config_request(settings, inp, names["endpoint_config"], names["model"]),
        "endpoint": requests.endpoint_request(settings, names["endpoint"], names["endpoint_config"]),
        "endpoint_update": requests.endpoint_update_request(names["endpoint"], names["endpoint_config"]),
    }
    if quotas is not None:
        runs = {"tokenizer": train_tokenizer, "shards": preprocess, "training": train, "endpoint_config": deploy}
        needed = needed_quotas(plan_requests, [kind for kind, runs_it in runs.items() if runs_it])
        if problem := quota_problem(needed, quotas, settings.account, settings.region):
            raise InputError(problem)

    if preprocess:  # a dataset made anew starts from an empty folder: no shard or manifest of an earlier run is kept
        store.delete([uri for uri, _ in store.list(requests.dataset_uri(settings, inp))])
    if train_tokenizer:  # the writes, once every check has passed
        for source in sources:
            store.put_text(sample_manifests[source.name], _sample_manifest(source.s3_uri, corpus[source.name], inp))
    if preprocess:  # what the dataset is made from, for the reuse check of later executions
        store.put_text(source_record_uri(settings, inp), json.dumps(dataset_source(settings, inp)))
    if train:  # what the run trains, for check_run of later executions
        store.put_text(run_record_uri(settings, run_name), json.dumps(run_record(settings, inp)))
    mix_rows = []
    if inp.corpus.sources and train:  # each source's tokens: estimated from its files, or counted in its manifests
        if preprocess:
            tokens = {name: mix.estimated_tokens(files) for name, files in corpus.items()}
        else:
            tokens = mix.counted_tokens(store, manifests)
        mix_rows = mix.mix_sources(inp, tokens, counted=not preprocess)
    shape = inp.training.shape
    return {
        "names": names,
        "run_name": run_name,
        "preprocess": {"run": preprocess, "train_tokenizer": train_tokenizer, "dataset_ready": dataset_ready},
        "stage_to_efs": train and inp.training.data_source == "efs",
        "datasync_include": f"/{inp.dataset.name}/*",
        "train": train,
        "trained_earlier": None if train else trained_earlier(settings, trained_job),
        "deploy": deploy,
        "dataset_uri": requests.dataset_uri(settings, inp),
        "model_artifact_uri": requests.model_artifact_uri(settings, trained_job),
        "hf_checkpoint": _hf_checkpoint(inp, requests.model_artifact_uri(settings, trained_job)),
        "checkpoint_uri": f"s3://{settings.checkpoints_bucket}/{run_name}/",
        "training_report_uri": requests.training_report_uri(settings, names["training"]),
        "profiler_report_uri": requests.profiler_report_uri(settings, names["training"]),  # with Debugger on
        "summary": {
            **_summary(inp, shape, recipe),
            "mix": mix.mix_line(mix_rows),  # the success e-mail's
            "mix_sources": mix_rows,
            "files_unsupported": _unsupported_line(unsupported, preprocess),
        },
        "requests": plan_requests,
    }


def _corpus_files(
    settings: StackSettings, inp: WorkflowInput, store: ObjectStore
) -> tuple[dict[str, list[tuple[str, int]]], list[str]]:
    """Each source's files preprocessing reads (URI, size), and the URIs of those in a format it cannot read; the
    first file of each is read as the jobs will read it."""
    formats = training_module("formats")
    corpus: dict[str, list[tuple[str, int]]] = {}
    first_files: dict[str, str] = {}
    unsupported: list[str] = []
    for where, source in corpus_sources(settings, inp):
        listed = store.list(source.s3_uri)
        files = [(u, size) for u, size in listed if formats.file_format(u) is not None]
        others = [u for u, _ in listed if formats.file_format(u) is None]
        if not files:
            found = f" ({len(others)} files in other formats, e.g. {others[0]})" if others else ""
            raise InputError(
                f"{where}.s3_uri: no {', '.join(CORPUS_SUFFIXES)} files under {source.s3_uri}{found}; upload the "
                "corpus first"
            )
        corpus[source.name] = files
        first_files[f"{where}.s3_uri"] = files[0][0]
        unsupported += others
    most = max(len(files) for files in corpus.values())
    if inp.preprocessing.instance_count > most:
        expected = f"at most {most}, the number of corpus files" + (" of its largest source" if len(corpus) > 1 else "")
        raise InputError(
            f"preprocessing.instance_count: {inp.preprocessing.instance_count} is not valid; expected {expected} "
            "(each instance receives whole files)"
        )
    try:
        check_corpus_readable(settings, first_files, store)
    except ConfigError as error:
        raise InputError(str(error)) from error
    return corpus, unsupported


def _unsupported_line(unsupported: list[str], preprocess: bool) -> str:
    """The success e-mail's words on corpus files preprocessing passed over, at most five of them named."""
    if not preprocess:
        return "none read (the dataset exists)"
    if not unsupported:
        return "none"
    named = ", ".join(unsupported[:5]) + (f" and {len(unsupported) - 5} more" if len(unsupported) > 5 else "")
    return f"{len(unsupported)} skipped, in no format preprocessing reads: {named}"


def _sample_manifest(prefix: str, files: list[tuple[str, int]], inp: WorkflowInput) -> str:
    """A SageMaker manifest of files spread evenly over a source, for the tokenizer job to read."""
    k = min(inp.corpus.tokenizer_sample_files, len(files))
    picks = sorted({round(i * (len(files) - 1) / max(k - 1, 1)) for i in range(k)})
    return json.dumps([{"prefix": prefix}, *(files[i][0][len(prefix) :] for i in picks)])


def _hf_checkpoint(inp: WorkflowInput, model_artifact_uri: str) -> str:
    """Where the job's Hugging Face checkpoint will be, as the success e-mail names it."""
    if not inp.training.hf_checkpoint:
        return "none (training.hf_checkpoint is false)"
    return f"hf/ in {model_artifact_uri}"


def _summary(inp: WorkflowInput, shape: ModelShape, recipe: Any) -> dict[str, Any]:
    train = inp.training
    params = shape.parameters(inp.vocab_size, train.sequence_length)
    fit = estimate_for_config(train, inp.vocab_size)
    return {
        "fit": fit.as_dict(),
        "modelled": fit.speed_line(),  # modelled, not measured (infra/estimate/step_time.py); the success e-mail's
        "least_recompute_that_fits": least_recompute(fit.inputs),
        "checkpoint": checkpoint.summary(
            fit
        ),  # save time, the stop verdict, an interval (infra/estimate/checkpoint.py)
        "model": f"{train.model_preset}: {shape.n_layer} layers x {shape.d_model} wide = {params / 1e6:,.1f} M params",
        "parameters": params,
        "steps": training_module("batch").optimizer_steps(train.train_tokens, train.global_batch_tokens),
        "recipe": recipe_summary(recipe),
        "cluster": f"{train.instance_count} x {train.instance_type}",
    }


def handler(event: dict, context: Any) -> dict[str, Any]:
    """Lambda entry point. ``event`` is ``{"input": <execution input>, "execution_name": <name>}``."""
    from infra.plan_step.object_store import S3Store
    from infra.plan_step.quotas import ServiceQuotas

    settings = StackSettings.from_env()
    return plan_execution(event.get("input"), event["execution_name"], settings, S3Store(), ServiceQuotas())
