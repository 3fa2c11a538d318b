"""Hugging Face decoders (Llama, Qwen3) from checkpoint directories: one artifact prefills and decodes
with its key/value cache kept on the device (relax_vk.core.states), and every step's logits and the
greedy tokens equal transformers' eager model on the CPU, on pocl (OpenCL) and lavapipe (Vulkan).
The checkpoints are made here from configs with seeded random weights (nothing is downloaded)."""

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import relax_vk  # noqa: E402
from helpers_build import marked_full_only  # noqa: E402
from relax_vk.core.errors import UnsupportedError  # noqa: E402
from relax_vk.frontends import ModelLoadError, load_model  # noqa: E402
from relax_vk.frontends.hf_decoder import DecoderConfig, read_weights  # noqa: E402
from relax_vk.runtime import Session  # noqa: E402
from relax_vk.runtime.generate import Generator  # noqa: E402

SMALL = dict(vocab_size=160, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, max_position_embeddings=256)  # fmt: skip
PROMPT = [3, 17, 5, 99, 42, 7, 120]


def _checkpoint(folder, arch: str, dtype=None):
    torch.manual_seed(0)
    if arch == "llama":
        model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**SMALL, attention_bias=True, mlp_bias=True))
    else:  # Qwen3: per-head q/k norms, a head_dim that is not hidden/heads (64: the attention's sums are
        # long enough to be split over a workgroup's lanes, relax_vk.schedules.run_time_sums), tied embeddings
        model = transformers.Qwen3ForCausalLM(transformers.Qwen3Config(**SMALL, head_dim=64, tie_word_embeddings=True))
    with torch.no_grad():  # (random biases and norm weights: zeros and ones would hide a mix-up)
        for name, p in model.named_parameters():
            if name.endswith(("bias", "norm.weight", "layernorm.weight")):
                p.copy_(0.5 + torch.rand_like(p) if "norm" in name else 0.1 * torch.randn_like(p))
    model.eval()
    if dtype is not None:
        model = model.to(dtype)
    model.save_pretrained(folder, safe_serialization=True)
    return model


@pytest.fixture(scope="module", params=["llama", "qwen3"])
def decoder(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp(request.param)
    return str(folder), _checkpoint(folder, request.param)


#: a test of what the two architectures share (the runtime's paths, the tools, the errors) runs on
#: one of them; the numbers of each are checked on both: prefill and decode in `make test`, float16
#: and int4 (the same kernels on both: their weights and norms differ, not their products) on one
#: by `make test` and on both by `make test-full`
ONE_ARCH = lambda arch: pytest.mark.parametrize("decoder", [arch], indirect=True)  # noqa: E731
FULL_ON = lambda arch: pytest.mark.parametrize(  # noqa: E731
    "decoder", marked_full_only(["llama", "qwen3"], {arch}, "the same kernels on the other architecture in make test"), indirect=True)


def _reference(model, tokens):
    with torch.no_grad():
        return model(torch.tensor([tokens])).logits[0].numpy()


def _assert_greedy_as_transformers(model, result, steps, prompt=PROMPT):
    """``result`` (``generate(prompt, steps, keep_logits=True)``): the greedy tokens of transformers'
    ``model``, and every step's logits within 1e-3 of its largest; returns transformers' logits
    over the prompt and the tokens."""
    assert result.tokens == _greedy(model, prompt, steps)
    return _assert_each_step_within(model, result, 1e-3, prompt)


def _assert_each_step_within(model, result, bound, prompt=PROMPT):
    """Every step's logits of ``result`` within ``bound`` of the largest of transformers' ``model``;
    returns transformers' logits over the prompt and the tokens."""
    reference = _reference(model, prompt + result.tokens)
    for step, logits in enumerate(result.logits):
        ref = reference[len(prompt) - 1 + step]
        assert np.abs(logits - ref).max() <= bound * np.abs(ref).max(), f"step {step}"
    return reference


def _greedy(model, prompt, steps):
    """transformers' greedy tokens after ``prompt``."""
    with torch.no_grad():
        return model.generate(torch.tensor([prompt]), attention_mask=torch.ones(1, len(prompt), dtype=torch.long), max_new_tokens=steps,
                              do_sample=False, pad_token_id=0)[0, len(prompt):].tolist()  # fmt: skip


@pytest.mark.parametrize("target, device", [("opencl", "pocl"), ("vulkan", "lavapipe")])
@pytest.mark.one_api("target")
def test_prefill_and_decode_equal_transformers_at_every_step(decoder, target, device, request):
    request.getfixturevalue(device)
    folder, model = decoder
    mod, _ = load_model(folder, dims={"T": (1, 48), "S": (1, 4)})  # a 7-token prompt: two prefill calls
    artifact = relax_vk.build(mod, target).artifact()
    table = SMALL["vocab_size"] * SMALL["hidden_size"]
    # tied embeddings (Qwen3 here) are one table on the device, not two
    assert sum(1 for c in artifact.constants.values() if c.size == table) == (1 if model.config.tie_word_embeddings else 2)
    generator = Generator(Session(artifact, device=device))
    reference = _assert_greedy_as_transformers(model, generator.generate(PROMPT, 32, keep_logits=True), 32)
    # a second sequence after reset reads nothing of the first
    generator.reset()
    np.testing.assert_allclose(generator.forward(PROMPT[:3]), _reference(model, PROMPT[:3]), rtol=1e-4, atol=1e-4 * np.abs(reference).max())
    # a left-padded prompt (attention_mask 0 on the pads): the padded queries attend to nothing, and
    # nothing of them (no NaN) reaches the other tokens, which equal transformers'
    generator.reset()
    ids, mask = [0, 0] + PROMPT[:2], [0, 0, 1, 1]
    (padded,) = generator.session.run([np.array([ids], np.int32), np.array([mask], np.int64)])
    with torch.no_grad():
        want = model(torch.tensor([ids]), attention_mask=torch.tensor([mask])).logits[0].numpy()
    assert np.isfinite(padded).all()
    np.testing.assert_allclose(padded[0, 2:], want[2:], rtol=1e-4, atol=1e-4 * np.abs(want).max())


@FULL_ON("qwen3")
def test_float16_stays_within_its_bound_of_transformers(decoder, lavapipe, pocl):
    """float16 weights, activations and cache (float32 accumulation, norms and softmax), on lavapipe:
    every step within 5e-3 of the largest logit of transformers' float32 model (measured 8e-4,
    transformers' own float16 model differs from its float32 one by as much). pocl has no
    cl_khr_fp16: the session refuses such an artifact by name."""
    folder, model = decoder
    mod, source = load_model(folder, dims={"T": (1, 40), "S": (1, 8)}, dtype="float16")
    assert source["dtype"] == "float16"
    artifact = relax_vk.build(mod, "vulkan").artifact()
    assert {t["dtype"] for t in artifact.program["tensors"] if t["name"].startswith("past_")} == {"float16"}
    _assert_each_step_within(model, Generator(Session(artifact, device="lavapipe")).generate(PROMPT, 16, keep_logits=True), 5e-3)
    with pytest.raises(relax_vk.runtime.DeviceLimitError, match="is float16 in a buffer.* lacks cl_khr_fp16"):
        Session(relax_vk.build(mod, "opencl").artifact(), device="pocl")


def _dequantized(model, scale_dtype="float32"):
    """``model`` with each weight matrix replaced by what its 4-bit packing stands for: the model an
    int4 build computes exactly."""
    import copy

    from relax_vk.frontends.blockwise import pack_symmetric, unpack

    twin = copy.deepcopy(model)
    with torch.no_grad():
        for _, p in twin.named_parameters():
            if p.dim() == 2:
                p.copy_(torch.from_numpy(unpack(*pack_symmetric(p.numpy().T, scale_dtype=scale_dtype)).T))
    return twin


@FULL_ON("llama")
def test_int4_weights_are_decoded_in_the_kernels_and_equal_transformers_on_the_same_weights(decoder, tmp_path, capsys, request):
    """4-bit weights (blocks of 32, Q4_0's rounding): the artifact holds the packed bytes and no float
    copy of any weight matrix; 32 greedy tokens and every step's logits equal transformers' model
    whose weights are the packing's values (1e-3 of the largest logit; measured 5e-7), Llama on pocl
    and Qwen3 (tied table: packed once, gathered and multiplied from the same bytes) on lavapipe."""
    from relax_vk.tools.cli import main

    folder, model = decoder
    target, device = ("opencl", "pocl") if model.config.model_type == "llama" else ("vulkan", "lavapipe")
    request.getfixturevalue(device)
    mod, source = load_model(folder, dims={"T": (1, 48), "S": (1, 4)}, quantize="int4")
    assert source["quantize"] == "int4"
    artifact = relax_vk.build(mod, target).artifact()
    matrices = [c for c in artifact.constants.values() if c.ndim >= 2 and c.size >= SMALL["hidden_size"] * 16]
    # (the packed blocks as 32-bit words: 16 bytes a block of 32, 4 words)
    assert matrices and all(c.dtype == np.uint32 for c in matrices), [(c.dtype, c.shape) for c in matrices]
    table = [c for c in artifact.constants.values() if c.shape == (SMALL["vocab_size"], SMALL["hidden_size"] // 32, 4)]
    assert len(table) == (1 if model.config.tie_word_embeddings else 2)
    float_bytes = sum(p.numel() * 4 for p in model.parameters())
    assert sum(c.nbytes for c in artifact.constants.values()) < float_bytes / 5
    assert all(k["schedule"] == "linear" for k in artifact.program["kernels"] if "matmul_int4" in k["name"])
    result = Generator(Session(artifact, device=device)).generate(PROMPT, 32, keep_logits=True)
    _assert_greedy_as_transformers(_dequantized(model), result, 32)  # (result.tokens: transformers' greedy tokens)
    # from the command line: build --quantize int4 on a checkpoint (int8 is ONNX's), generate --int4
    path = str(tmp_path / "int4.rvk")
    assert main(["build", folder, "--target", target, "--dim", "T=1:16", "--dim", "S=1:4", "--quantize", "int8", "-o", path]) == 2
    assert "a decoder checkpoint takes --quantize int4" in capsys.readouterr().err
    assert main(["generate", folder, "--target", target, "--device", device, "--dim", "T=1:16", "--dim", "S=1:4", "--int4",
                 "--prompt-ids", ",".join(map(str, PROMPT)), "--new-tokens", "4", "--json"]) == 0  # fmt: skip
    assert json.loads(capsys.readouterr().out)["tokens"] == result.tokens[:4]


@ONE_ARCH("qwen3")
def test_int4_tables_past_one_binding_are_held_in_parts(decoder, monkeypatch, request):
    """A 4-bit weight past ``INT4_PART_BYTES`` (here 2 KiB: the 160-token table in three parts, the
    q projection in two) is held in parts along its outputs: the embedding gather picks each id's
    part, the matmuls' parts are joined; tokens and logits as with one part."""
    from relax_vk.frontends import hf_decoder

    folder, model = decoder
    target, device = ("opencl", "pocl") if model.config.model_type == "llama" else ("vulkan", "lavapipe")
    request.getfixturevalue(device)
    monkeypatch.setattr(hf_decoder, "INT4_PART_BYTES", 2048)
    mod, _ = load_model(folder, dims={"T": (1, 24), "S": (1, 4)}, quantize="int4")
    artifact = relax_vk.build(mod, target).artifact()
    packed = [c.nbytes for c in artifact.constants.values() if c.dtype == np.uint32]
    assert max(packed) <= 2048 and sum(packed) >= SMALL["vocab_size"] * SMALL["hidden_size"] // 2  # (the 5 KiB table among them, in parts)
    result = Generator(Session(artifact, device=device)).generate(PROMPT, 8, keep_logits=True)
    twin = _dequantized(model)
    reference = _reference(twin, PROMPT + result.tokens)
    for step, logits in enumerate(result.logits):
        ref = reference[len(PROMPT) - 1 + step]
        assert np.abs(logits - ref).max() <= 1e-3 * np.abs(ref).max(), f"step {step}"
    assert result.tokens == [int(np.argmax(reference[len(PROMPT) - 1 + i])) for i in range(8)]


@ONE_ARCH("llama")
def test_float_weights_past_one_binding_stay_matmuls_the_compiler_splits(decoder, monkeypatch, request):
    """A float weight past ``MIN_BINDING_BYTES`` (here 2 KiB: every layer's) is not read in the
    checkpoint's ``[out, in]`` layout by a kernel of the decoder's own but is a matmul against its
    transpose, whose constant weight the compiler splits under a binding; the logits equal
    transformers' as with the kernels of the decoder's own."""
    from relax_vk.frontends import hf_decoder

    folder, model = decoder
    target, device = ("vulkan", "lavapipe") if model.config.model_type == "llama" else ("opencl", "pocl")
    request.getfixturevalue(device)
    monkeypatch.setattr(hf_decoder, "MIN_BINDING_BYTES", 2048)
    mod, _ = load_model(folder, dims={"T": (1, 16), "S": (1, 8)})
    names = [gv.name_hint for gv in mod.functions]
    assert not any(n.startswith("matmul") for n in names) and any("gate_up" in n for n in names)  # (the pair keeps its kernel)
    result = Generator(Session(relax_vk.build(mod, target).artifact(), device=device)).generate(PROMPT, 4, keep_logits=True)
    reference = _reference(model, PROMPT + result.tokens)
    for step, logits in enumerate(result.logits):
        ref = reference[len(PROMPT) - 1 + step]
        assert np.abs(logits - ref).max() <= 1e-3 * np.abs(ref).max(), f"step {step}"


@ONE_ARCH("qwen3")
def test_last_token_logits_only(decoder, pocl):
    """``logits="last"``: each call returns its last token's logits ``[1, 1, V]``, the head
    computed on that row only (a matrix-vector product: the linear schedule), equal to
    transformers' at that position; the greedy tokens are the same."""
    folder, model = decoder
    mod, source = load_model(folder, dims={"T": (1, 48), "S": (1, 4)}, logits="last")
    assert source["logits"] == "last"
    artifact = relax_vk.build(mod, "opencl").artifact()
    assert artifact.program["tensors"][artifact.program["outputs"][0]]["shape"] == [1, 1, SMALL["vocab_size"]]
    generator = Generator(Session(artifact, device="pocl"))
    chunks = generator.forward(PROMPT)  # 7 tokens: two calls of at most 4, one row each
    assert chunks.shape == (2, SMALL["vocab_size"])
    reference = _reference(model, PROMPT)
    np.testing.assert_allclose(chunks, reference[[3, 6]], rtol=1e-4, atol=1e-4 * np.abs(reference).max())
    assert generator.generate(PROMPT, 8).tokens == _greedy(model, PROMPT, 8)
    with pytest.raises(UnsupportedError, match="apply to decoder checkpoints"):
        load_model("mobilenet_v2", logits="last")


@ONE_ARCH("qwen3")
@pytest.mark.parametrize("target, device", [("opencl", "pocl"), ("vulkan", "lavapipe")])
@pytest.mark.one_api("target")
def test_prompts_whose_partial_sums_pass_a_binding_take_the_one_pass_attention(decoder, target, device, request, monkeypatch):
    """A model whose attention partial sums ``[S, H, P, D]`` would not fit one buffer binding (a
    long prompt over a long cache) takes the one-pass attention kernel (the bound lowered here to
    make a small model one; the rule itself: tests/schedules/test_decode_attention.py): prefill and
    16 greedy steps equal transformers'."""
    from relax_vk.schedules import decode_attention

    request.getfixturevalue(device)
    folder, model = decoder
    monkeypatch.setattr(decode_attention, "PARTIAL_SUMS_MAX_BYTES", 0)
    mod, _ = load_model(folder, dims={"T": (1, 48), "S": (1, 4)})
    artifact = relax_vk.build(mod, target).artifact()
    assert {k["name"] for k in artifact.program["kernels"] if "attention" in k["name"]} == {"attention_one_pass_kernel"}
    _assert_greedy_as_transformers(model, Generator(Session(artifact, device=device)).generate(PROMPT, 16, keep_logits=True), 16)


@ONE_ARCH("llama")
def test_the_cache_bound_and_the_vocabulary_are_refused_by_name(decoder, pocl):
    folder, _ = decoder
    assert load_model(folder)[1]["dims"] == {"T": [1, 256], "S": [1, 128]}  # (T at most max_position_embeddings)
    mod, source = load_model(folder, dims={"T": (1, 8)})
    assert source["dims"] == {"T": [1, 8], "S": [1, 8]}
    generator = Generator(Session(relax_vk.build(mod, "opencl").artifact(), device="pocl"))
    with pytest.raises(ValueError, match="need 10 cache rows; the artifact holds 8"):
        generator.generate(PROMPT, 4)
    with pytest.raises(ValueError, match=r"token id 160 is outside the vocabulary \(0\.\.159\)"):
        generator.forward([160])
    generator.forward(PROMPT)
    with pytest.raises(ValueError, match="7 \\+ 2 tokens pass the cache's 8"):
        generator.forward([1, 2])


def test_bfloat16_checkpoints_are_read_exactly(tmp_path):
    model = _checkpoint(tmp_path, "qwen3", dtype=torch.bfloat16)
    assert b'"BF16"' in (tmp_path / "model.safetensors").read_bytes()[:4096]
    weights = read_weights(str(tmp_path))
    for name, p in model.state_dict().items():
        if name in weights:
            np.testing.assert_array_equal(weights[name], p.float().numpy())


@pytest.mark.parametrize(
    "change, error, message",
    [
        ({"rope_scaling": {"rope_type": "mrope", "mrope_section": [2, 3, 3]}}, UnsupportedError,
         "rope_scaling .* is not supported .*rope_type one of default, linear, llama3, yarn, dynamic, longrope"),
        ({"rope_scaling": {"rope_type": "longrope", "short_factor": [1.0] * 6, "long_factor": [2.0] * 8}}, UnsupportedError,
         "rope_scaling short_factor has 6 values; the rotary dims \\(16\\) take 8"),
        ({"rope_scaling": {"rope_type": "llama3", "factor": 8.0}}, UnsupportedError, "of type 'llama3' lacks low_freq_factor, high_freq_factor"),
        ({"partial_rotary_factor": 0.5}, UnsupportedError, "partial_rotary_factor 0.5: transformers' llama rotates whole heads"),
        ({"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2"}, UnsupportedError, "relax_vk runs Gemma2ForCausalLM, Gemma3ForCausalLM, LlamaForCausalLM"),
        ({"final_logit_softcapping": 30.0}, UnsupportedError, "final_logit_softcapping 30.0: soft-capping is gemma2, gemma3's, not llama's"),
        ({"num_key_value_heads": 3}, UnsupportedError, "4 attention heads are not a multiple of 3"),
        ({"hidden_act": "gelu"}, UnsupportedError, "hidden_act 'gelu'"),
        ({"hidden_size": None}, ModelLoadError, "config.json"),
        ({"num_attention_heads": 0}, UnsupportedError, "0 attention heads, 0 key/value heads \\(at least 1 each\\)"),
        ({"num_hidden_layers": "drop"}, ModelLoadError, "config.json: no 'num_hidden_layers', which a decoder config needs"),
        ("a list", ModelLoadError, "config.json: a JSON list, not an object of settings"),
    ],
)
def test_what_the_converter_does_not_know_is_named(tmp_path, change, error, message):
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "intermediate_size": 96,
              "num_hidden_layers": 1, "num_attention_heads": 4, "vocab_size": 32}  # fmt: skip
    if change == "a list":
        config = [config]
    else:
        config.update(change)
        config = {k: v for k, v in config.items() if v != "drop"}
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(error, match=message):
        DecoderConfig.from_dir(str(tmp_path))


#: checkpoints whose attention differs from the default: scaled RoPE of each kind a config names
#: (llama3: Llama 3.1/3.2; yarn: a factor on cos and sin too; linear under its older key ``type``),
#: bounds and frequencies chosen so that the scaling changes the angles inside the cache bound of 48
#: tokens; Mistral's sliding window on every layer, and Gemma 3 (its norms of 1 + weight, scaled
#: embeddings, sandwich norms, tanh-GELU, a score scale of its own, and sliding layers with their
#: own RoPE theta beside a full one), with windows of 8 tokens under the 33 of a generation; Gemma 2
#: (no q/k norms, every other layer sliding, scores and logits soft-capped by caps these weights
#: reach: without either cap its logits move by 0.2-0.8; eager attention, as transformers asks for
#: soft-capped scores)
SCALED = {
    "llama3": lambda: transformers.LlamaForCausalLM(transformers.LlamaConfig(**SMALL, rope_theta=500000.0, tie_word_embeddings=True, rope_scaling={
        "rope_type": "llama3", "factor": 8.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0, "original_max_position_embeddings": 16})),
    "yarn": lambda: transformers.Qwen3ForCausalLM(transformers.Qwen3Config(**SMALL, head_dim=32, rope_scaling={
        "rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32})),
    "linear": lambda: transformers.Qwen2ForCausalLM(transformers.Qwen2Config(**SMALL, rope_scaling={"type": "linear", "factor": 3.0})),
    "mistral": lambda: transformers.MistralForCausalLM(transformers.MistralConfig(**SMALL, sliding_window=8, head_dim=16)),
    # Phi-4-mini's attention: q, k and v in one weight, gate and up in another, RoPE over three
    # quarters of each head, LongRoPE's short factors and its attention factor (8x the original 64)
    "phi3": lambda: transformers.Phi3ForCausalLM(transformers.Phi3Config(**{**SMALL, "max_position_embeddings": 512}, pad_token_id=0,
        partial_rotary_factor=0.75, original_max_position_embeddings=64, rope_scaling={
            "type": "longrope", "short_factor": [1.0 + 0.3 * i for i in range(6)], "long_factor": [2.0 + i for i in range(6)]})),
    "gemma3": lambda: transformers.Gemma3ForCausalLM(transformers.Gemma3TextConfig(**{**SMALL, "num_hidden_layers": 3}, head_dim=32,
        sliding_window=8, query_pre_attn_scalar=24, layer_types=["sliding_attention", "full_attention", "sliding_attention"])),
    "gemma2": lambda: transformers.Gemma2ForCausalLM(transformers.Gemma2Config(**{**SMALL, "num_hidden_layers": 3}, head_dim=32,
        sliding_window=8, query_pre_attn_scalar=24, attn_logit_softcapping=0.05, final_logit_softcapping=1.0, attn_implementation="eager")),
}  # fmt: skip
#: what takes the feature away: RoPE unscaled, or a window past every sequence (and no caps)
PLAIN = {"mistral": {"sliding_window": 4096}, "gemma3": {"sliding_window": 4096},
         "gemma2": {"sliding_window": 4096, "attn_logit_softcapping": None, "final_logit_softcapping": None}}  # fmt: skip


def _scaled_model(kind):
    """``SCALED[kind]`` from seed 0, its norm weights random (Gemma's zeros, as 1 + weight, would
    hide a missing offset)."""
    torch.manual_seed(0)
    model = SCALED[kind]().eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(0.5 + torch.rand_like(p))
    return model


#: `make test` runs YaRN (scaled frequencies and a factor on cos and sin) and Gemma 3 (sliding layers
#: beside full ones) end to end; the other kinds differ from them in constants, which
#: tests/frontends/test_rope_scaling.py checks against transformers' own
SCALED_IN_FULL = {"llama3", "linear", "mistral"}


@pytest.mark.parametrize("kind", marked_full_only(sorted(SCALED), SCALED_IN_FULL, "their frequencies and layers: test_rope_scaling.py"))
@pytest.mark.parametrize("target, device", [("opencl", "pocl"), ("vulkan", "lavapipe")])
@pytest.mark.one_api("target")
def test_scaled_rope_sliding_windows_and_gemma_equal_transformers(kind, target, device, request, tmp_path):
    """Every step's logits and 12 greedy tokens equal transformers' for each kind of ``rope_scaling``,
    for Mistral's sliding window and for Gemma 2 and 3, past the windows. Each model differs from itself
    without the feature, so a converter that ignored it would fail."""
    request.getfixturevalue(device)
    model = _scaled_model(kind)
    model.save_pretrained(tmp_path, safe_serialization=True)
    plain = type(model)(type(model.config)(**{**model.config.to_dict(), **PLAIN.get(kind, {"rope_scaling": None})})).eval()
    plain.load_state_dict(model.state_dict())
    with torch.no_grad():
        assert not torch.allclose(plain(torch.tensor([PROMPT * 5])).logits, model(torch.tensor([PROMPT * 5])).logits, atol=1e-4)
    mod, _ = load_model(str(tmp_path), dims={"T": (1, 48), "S": (1, 4)})
    generator = Generator(Session(relax_vk.build(mod, target).artifact(), device=device))
    _assert_greedy_as_transformers(model, generator.generate(PROMPT * 3, 12, keep_logits=True), 12, prompt=PROMPT * 3)
    if kind == "phi3":  # past original_max_position_embeddings transformers turns new tokens by the long factors
        with pytest.raises(UnsupportedError, match="max_len 65 is past original_max_position_embeddings \\(64\\)"):
            load_model(str(tmp_path), dims={"T": (1, 65)})


@pytest.mark.full_only("float16's kernels are checked on Llama and Qwen3 in make test")
def test_gemma_float16_stays_within_its_bound_of_transformers(lavapipe, tmp_path):
    """Gemma 3 in float16 on lavapipe: every step within 1e-2 of the largest logit of transformers'
    float32 model (measured 7.7e-3, the score scale applied in float32 by the attention kernel;
    1.7e-2 when it was folded into q's float16 norm weight. transformers' own float16 model is 1.2e-2
    away, and rounding the weights alone moves it 5e-3: its ``1 + weight`` norms make it more
    sensitive than Qwen3)."""
    model = _scaled_model("gemma3")
    model.save_pretrained(tmp_path, safe_serialization=True)
    mod, _ = load_model(str(tmp_path), dims={"T": (1, 40), "S": (1, 8)}, dtype="float16")
    result = Generator(Session(relax_vk.build(mod, "vulkan").artifact(), device="lavapipe")).generate(PROMPT, 16, keep_logits=True)
    _assert_each_step_within(model, result, 1e-2)


def test_checkpoint_weights_the_architecture_does_not_read_are_refused_by_name(tmp_path):
    """A weight the program would not read (here a Qwen3 o_proj bias under a config without
    attention_bias) is refused, never dropped."""
    torch.manual_seed(0)
    model = transformers.Qwen3ForCausalLM(transformers.Qwen3Config(**SMALL, attention_bias=True))
    model.save_pretrained(tmp_path, safe_serialization=True)
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "attention_bias": False}))
    with pytest.raises(UnsupportedError, match="weights this architecture does not read: model.layers.0.self_attn.k_proj.bias"):
        load_model(str(tmp_path), dims={"T": (1, 16)})


@ONE_ARCH("llama")
def test_a_missing_weight_is_named(decoder, tmp_path):
    folder, model = decoder
    from safetensors.torch import save_file

    state = {k: v.contiguous() for k, v in model.state_dict().items() if "layers.1.mlp.up_proj" not in k and k != "lm_head.weight"}
    save_file(state, str(tmp_path / "model.safetensors"))
    (tmp_path / "config.json").write_text(open(f"{folder}/config.json").read())
    with pytest.raises(ModelLoadError, match="no weight model.layers.1.mlp.up_proj.weight"):
        load_model(str(tmp_path), dims={"T": (1, 32)})


@ONE_ARCH("qwen3")
def test_the_command_line_builds_a_checkpoint_and_generates_from_the_artifact(decoder, pocl, tmp_path, capsys):
    from relax_vk.tools.cli import main

    folder, model = decoder
    path = str(tmp_path / "decoder.rvk")
    assert main(["build", folder, "--dim", "T=1:16", "--dim", "S=1:8", "-o", path]) == 0
    capsys.readouterr()
    assert main(["generate", path, "--device", "pocl", "--prompt-ids", "3,17,5", "--new-tokens", "5", "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    expected = _greedy(model, [3, 17, 5], 5)
    assert record["tokens"] == expected and record["backend"] == "opencl"
    assert record["prompt_tokens"] == 3 and record["prefill_tokens_per_s"] > 0 and record["decode_tokens_per_s"] > 0
    assert record["finish_reason"] == "length"
    # stop tokens end the tokens where transformers' generate stops at its end-of-sequence ids: given
    # (--stop-ids), or the checkpoint's own (--stop-at-eos: generation_config.json, read at build)
    stop = expected[2]
    assert main(["generate", path, "--device", "pocl", "--prompt-ids", "3,17,5", "--new-tokens", "5", "--stop-ids", str(stop), "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["tokens"] == expected[: expected.index(stop) + 1] and record["finish_reason"] == "stop"
    assert main(["generate", path, "--device", "pocl", "--prompt-ids", "3", "--stop-at-eos"]) == 2
    assert "names no end-of-sequence token" in capsys.readouterr().err
    import shutil

    shutil.copytree(folder, tmp_path / "eos")
    (tmp_path / "eos" / "generation_config.json").write_text(json.dumps({"eos_token_id": [expected[1], 9999]}))
    assert main(["build", str(tmp_path / "eos"), "--dim", "T=1:16", "--dim", "S=1:8", "-o", str(tmp_path / "eos.rvk")]) == 0
    capsys.readouterr()
    assert main(["generate", str(tmp_path / "eos.rvk"), "--device", "pocl", "--prompt-ids", "3,17,5", "--new-tokens", "5", "--stop-at-eos", "--json"]) == 0
    with torch.no_grad():
        stopped = model.generate(torch.tensor([[3, 17, 5]]), attention_mask=torch.ones(1, 3, dtype=torch.long), max_new_tokens=5,
                                 do_sample=False, pad_token_id=0, eos_token_id=[expected[1], 9999])[0, 3:].tolist()  # fmt: skip
    assert json.loads(capsys.readouterr().out)["tokens"] == stopped == expected[: expected.index(expected[1]) + 1]
    assert main(["generate", path, "--device", "pocl", "--prompt-ids", "3,x"]) == 2
    assert "--prompt-ids '3,x' is not a comma-separated list" in capsys.readouterr().err
    assert main(["generate", path, "--device", "pocl", "--prompt-ids", "3", "--int4"]) == 2
    assert "--int4, --fp16 and --logits apply when building from a checkpoint" in capsys.readouterr().err
    # a text prompt through the checkpoint's own tokenizer, the new tokens decoded (relax_vk.tools.tokenizer)
    words = _tokenizer(tmp_path / "tokenizer")
    assert main(["generate", path, "--device", "pocl", "--prompt", "a b c", "--new-tokens", "5", "--json"]) == 2
    assert "holds no tokenizer; give --tokenizer DIR" in capsys.readouterr().err
    assert main(["generate", path, "--device", "pocl", "--tokenizer", str(tmp_path / "tokenizer"), "--prompt", "w3 w17 w5",
                 "--new-tokens", "5", "--json"]) == 0  # fmt: skip
    record = json.loads(capsys.readouterr().out)
    assert record["prompt_ids"] == [1, 3, 17, 5] and record["tokens"] == _greedy(model, [1, 3, 17, 5], 5)
    assert record["text"] == " ".join(words[t] for t in record["tokens"] if t > 1)  # (ids 0 and 1: pad and bos, skipped)
    assert main(["generate", path, "--device", "pocl", "--tokenizer", str(tmp_path / "tokenizer"), "--prompt", "w3", "--chat",
                 "--new-tokens", "2", "--json"]) == 0  # fmt: skip
    record = json.loads(capsys.readouterr().out)
    assert record["prompt_ids"] == [1, 7, 3, 8] and record["tokens"] == _greedy(model, [1, 7, 3, 8], 2)  # (the template: bos user w3 assistant)
    assert main(["generate", path, "--device", "pocl", "--prompt-ids", "3", "--chat"]) == 2
    assert "--chat applies to a text --prompt" in capsys.readouterr().err
    # sampled (relax_vk.runtime.sampling): a seed repeats its tokens, each among the 3 most likely of
    # transformers' logits after the tokens before it
    sample = ["generate", path, "--device", "pocl", "--prompt-ids", "3,17,5", "--new-tokens", "6", "--temperature", "1.5", "--top-k", "3",
              "--seed", "11", "--json"]  # fmt: skip
    assert main(sample) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["sampling"] == {"temperature": 1.5, "top_k": 3, "top_p": None, "seed": 11}
    logits = _reference(model, [3, 17, 5] + record["tokens"])
    for step, token in enumerate(record["tokens"]):
        assert token in np.argsort(logits[2 + step])[-3:], step
    assert main(sample) == 0 and json.loads(capsys.readouterr().out)["tokens"] == record["tokens"]
    assert main(["generate", path, "--device", "pocl", "--prompt-ids", "3", "--top-k", "3"]) == 2
    assert "give --temperature above 0 too" in capsys.readouterr().err
    # streamed: each token printed as it is made, its text through the tokenizer (else its id), then the record
    assert main(["generate", path, "--device", "pocl", "--tokenizer", str(tmp_path / "tokenizer"), "--prompt", "w3 w17 w5",
                 "--new-tokens", "5", "--stream"]) == 0  # fmt: skip
    out = capsys.readouterr().out.splitlines()
    greedy = _greedy(model, [1, 3, 17, 5], 5)
    assert out[0] == " ".join(words[t] for t in greedy if t > 1) and out[1].startswith("device:")
    assert main(["generate", path, "--device", "pocl", "--prompt-ids", "3,17,5", "--new-tokens", "5", "--stream"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == ",".join(map(str, expected))
    assert main(["generate", path, "--device", "pocl", "--prompt-ids", "3", "--stream", "--json"]) == 2
    assert "--stream prints the tokens as they come" in capsys.readouterr().err


def _tokenizer(folder):
    """A word-level tokenizer of the 160 ids (``w<i>``; 0 pad, 1 bos; 7 and 8 the chat template's
    user and assistant marks) saved as transformers saves one; returns the words by id."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    words = ["<pad>", "<s>"] + [f"w{i}" for i in range(2, SMALL["vocab_size"])]
    words[7], words[8] = "<user>", "<assistant>"
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<pad>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", pad_token="<pad>",
                                                additional_special_tokens=["<user>", "<assistant>"],
                                                chat_template="{{ bos_token }}{% for m in messages %}<user> {{ m['content'] }} {% endfor %}"
                                                              "{% if add_generation_prompt %}<assistant>{% endif %}")  # fmt: skip
    fast.save_pretrained(folder)
    return words


@ONE_ARCH("qwen3")
def test_bisect_compares_every_op_of_a_decoder_with_its_states_as_zeros(decoder, pocl):
    from relax_vk.tools.bisect import Bisection, bisect_session, build_unshared

    folder, _ = decoder
    mod, _ = load_model(folder, dims={"T": (1, 8), "S": (1, 4)})
    session = Session(build_unshared(mod, "opencl", "pocl"), device="pocl")
    ids, mask = np.array([[3, 17, 5, 99]], np.int32), np.ones((1, 6), np.int64)  # (rows 0-1 of the cache: zeros, as after load)
    result = bisect_session(session, mod, [ids, mask], "decoder")
    assert result.ok and len(result.compared) >= 16, result.table()  # (an op fused into the next is compared there)
    assert {"model.layers.0.self_attn.attention", "model.layers.1.residual_mlp", "lm_head"} <= {r["op"] for r in result.compared}
    nothing = Bisection(model="m", backend="opencl", device="d", tolerance=1e-4)
    assert not nothing.ok and "no op output could be compared" in nothing.table()


def test_configs_as_transformers_reads_them(tmp_path, pocl):
    """What transformers makes of a config, relax_vk makes of it too, with every step's logits and the
    greedy tokens equal on pocl, for a checkpoint that meets three of transformers' rules at once:
    a config as transformers 5 writes it (RoPE in ``rope_parameters``, llama3 scaling here), a
    tanh-GELU ``hidden_act`` on Llama (not only Gemma's), and tied embeddings with a stale
    ``lm_head.weight`` in the file (transformers ties and never reads it)."""
    from safetensors.torch import load_file, save_file

    rope = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8}
    torch.manual_seed(0)
    config = transformers.LlamaConfig(**SMALL, hidden_act="gelu_pytorch_tanh", tie_word_embeddings=True, rope_theta=100.0, rope_scaling=rope)
    model = transformers.LlamaForCausalLM(config).eval()
    with torch.no_grad():  # (peaky attention, so that the positions' rotation matters)
        for name, p in model.named_parameters():
            if name.endswith(("q_proj.weight", "k_proj.weight")):
                p.mul_(6.0)
    model.save_pretrained(tmp_path, safe_serialization=True)
    weights = load_file(str(tmp_path / "model.safetensors"))
    save_file({**weights, "lm_head.weight": torch.randn(SMALL["vocab_size"], SMALL["hidden_size"])}, str(tmp_path / "model.safetensors"),
              metadata={"format": "pt"})  # fmt: skip
    saved = json.loads((tmp_path / "config.json").read_text())
    for key in ("rope_theta", "rope_scaling"):
        saved.pop(key, None)
    (tmp_path / "config.json").write_text(json.dumps({**saved, "rope_parameters": {"rope_theta": 100.0, **rope}}))
    read = DecoderConfig.from_dir(str(tmp_path))
    assert read.rope_theta == 100.0 and dict(read.rope_scaling)["rope_type"] == "llama3" and read.activation == "gelu_tanh" and read.tie_embeddings
    mod, _ = load_model(str(tmp_path), dims={"T": (1, 40), "S": (1, 8)})
    generator = Generator(Session(relax_vk.build(mod, "opencl").artifact(), device="pocl"))
    _assert_greedy_as_transformers(model, generator.generate(PROMPT * 3, 8, keep_logits=True), 8, prompt=PROMPT * 3)


def test_transformers_5_rope_parameters_and_gemma_3_caps_are_read_as_transformers_reads_them():
    """Gemma 3 as transformers 5 writes it (RoPE per layer type: the full layers' scaling and theta,
    the sliding layers' own theta) reads as the transformers 4 keys do; Phi-3's partial rotation may
    sit in ``rope_parameters`` too; Gemma 3's attention does not cap scores whatever
    ``attn_logit_softcapping`` says (transformers' never reads it), its logits are capped."""
    base = dict(SMALL, architectures=["Gemma3ForCausalLM"], model_type="gemma3_text", head_dim=16, sliding_window=8)
    v4 = DecoderConfig.from_dict({**base, "rope_theta": 1e6, "rope_local_base_freq": 1e4, "rope_scaling": {"rope_type": "linear", "factor": 8.0},
                                  "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0})  # fmt: skip
    v5 = DecoderConfig.from_dict({**base, "rope_parameters": {"full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6},
                                                              "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}},
                                  "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0})  # fmt: skip
    assert v4 == v5 and v5.local_rope_theta == 1e4 and v5.rope_theta == 1e6 and v5.attention_softcap is None and v5.logit_softcap == 30.0
    with pytest.raises(UnsupportedError, match="sliding_attention rope_type 'linear'"):
        DecoderConfig.from_dict({**base, "rope_parameters": {"full_attention": {"rope_type": "default"}, "sliding_attention": {"rope_type": "linear", "factor": 2.0}}})
    phi = dict(SMALL, architectures=["Phi3ForCausalLM"], model_type="phi3")
    assert (DecoderConfig.from_dict({**phi, "rope_parameters": {"rope_type": "default", "rope_theta": 1e4, "partial_rotary_factor": 0.5}})
            == DecoderConfig.from_dict({**phi, "rope_theta": 1e4, "partial_rotary_factor": 0.5}))  # fmt: skip
    with pytest.raises(UnsupportedError, match="hidden_act 'relu'"):
        DecoderConfig.from_dict({**SMALL, "architectures": ["LlamaForCausalLM"], "hidden_act": "relu"})
