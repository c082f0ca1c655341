import gzip
import json
import math

import hlo_export
from contract.presets import get_preset, parameter_count
from gpt.model import padded_vocab
from tensorflow.compiler.xla import xla_data_pb2
from tensorflow.compiler.xla.service import hlo_pb2


def test_the_json_names_every_parameter_of_the_hlo_and_the_results_are_the_loss_and_each_gradient(tmp_path):
    args = hlo_export.parse_args(["--preset", "tiny", "--micro-batch", "2", "--sequence-length", "48", "--vocab", "96",
                                  "--out", str(tmp_path)])  # fmt: skip
    meta = json.loads(hlo_export.export(args).read_text())
    module = hlo_pb2.HloModuleProto.FromString(gzip.decompress((tmp_path / "tiny-bf16-b2-s48.hlo.pb.gz").read_bytes()))
    program = module.host_program_shape
    hlo_inputs = [(list(p.dimensions), xla_data_pb2.PrimitiveType.Name(p.element_type)) for p in program.parameters]
    dtypes = {"int32": "S32", "float32": "F32"}
    assert hlo_inputs == [(spec["shape"], dtypes[spec["dtype"]]) for spec in meta["inputs"]]
    # Without the model's own name (Keras numbers it: gpt_90 after other tests made 89 models in this process).
    names = [spec["name"].split("/", 1)[-1] for spec in meta["inputs"]]
    assert names[:3] == ["tokens", "stream", "token_embedding/embeddings"] and meta["inputs"][1]["shape"] == []
    assert meta["inputs"][-1]["name"] == "loss_scale" and meta["inputs"][0]["shape"] == [2, 49]
    weights = meta["inputs"][2:-1]
    assert [list(r.dimensions) for r in program.result.tuple_shapes] == [[]] + [w["shape"] for w in weights]
    count = parameter_count(get_preset("tiny"), vocab_size=padded_vocab(96), sequence_length=48)  # 128 rows
    assert sum(math.prod(w["shape"]) for w in weights) == count
    assert meta["hlo_bytes"] == len(gzip.decompress((tmp_path / "tiny-bf16-b2-s48.hlo.pb.gz").read_bytes()))
    assert 0 < meta["largest_constant"] < 48  # shapes and scalars: no [T, T] mask (48² elements until issue 48)
    assert "tensorflow" not in meta and not (tmp_path / "tiny-bf16-b2-s48.npz").exists()  # values only when asked
