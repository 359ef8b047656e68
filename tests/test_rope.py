"""RoPE: the default against transformers' RoFormer, the scaled types against their formulas and transformers' own
functions, 2-D positions against their defining properties, and bad input."""

import pytest
import torch
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
from transformers.models.roformer.modeling_roformer import RoFormerSinusoidalPositionalEmbedding

from roformer_hf import RoFormerConfig
from roformer_hf.modeling import (
    RoFormerModel,
    RoFormerRotaryEmbedding,
    apply_rotary,
    default_inverse_frequencies,
    inverse_frequencies,
    ntk_inverse_frequencies,
    rotate,
    rotation_of,
)

HEAD_DIM = 16


def tiny_config(**kwargs) -> RoFormerConfig:
    settings = {
        "vocab_size": 99,
        "hidden_size": 2 * HEAD_DIM,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "intermediate_size": 37,
        "max_position_embeddings": 32,
        "hidden_dropout_prob": 0.0,
        "attention_probs_dropout_prob": 0.0,
    }
    return RoFormerConfig(**{**settings, **kwargs})


def rope_config(rope_type: str, **rope_parameters) -> RoFormerConfig:
    return tiny_config(rope_parameters={"rope_type": rope_type, "rope_theta": 10000.0, **rope_parameters})


def cos_sin(config: RoFormerConfig, position_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return RoFormerRotaryEmbedding(config)(torch.empty(0), position_ids)


def positions(seq_len: int) -> torch.Tensor:
    return torch.arange(seq_len)[None]  # (1, T)


def rotation_matrices(cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """R(p) for every position, as (T, D, D) matrices: apply_rotary is linear, so rotating the basis gives R."""
    head_dim, seq_len = cos.shape[-1], cos.shape[1]
    basis = torch.eye(head_dim, dtype=torch.float64)[:, None, :].expand(head_dim, seq_len, head_dim)  # (D, T, D)
    rotated_basis = apply_rotary(basis[None], cos.double(), sin.double())[0]  # [k, t] = R(t) e_k, one "head" per k
    return rotated_basis.permute(1, 2, 0)  # (T, D, D): column k of R(t) is R(t) e_k


# 1-D RoPE: default, ntk, dynamic and transformers' types


def test_default_matches_transformers_roformer_sinusoids():
    seq_len = 50
    cos, sin = cos_sin(tiny_config(), positions(seq_len))
    reference = RoFormerSinusoidalPositionalEmbedding(seq_len, HEAD_DIM).create_weight()  # (T, D): [sin | cos]
    torch.testing.assert_close(sin[0, :, 0::2], reference[:, : HEAD_DIM // 2])
    torch.testing.assert_close(cos[0, :, 0::2], reference[:, HEAD_DIM // 2 :])
    assert torch.equal(cos[..., 0::2], cos[..., 1::2]) and torch.equal(sin[..., 0::2], sin[..., 1::2])
    assert cos.dtype == sin.dtype == torch.float32 and cos.shape == (1, seq_len, HEAD_DIM)


def test_ntk_golden_values():
    # theta' = 10000 * 4 ** (8 / 6) = 63496.042...; theta'^(-2i/8) for i = 0..3
    expected = torch.tensor([1.0, 0.0629960525, 0.0039685026, 0.00025])
    torch.testing.assert_close(ntk_inverse_frequencies(8, 10000.0, 4.0), expected, rtol=1e-6, atol=0)


@pytest.mark.parametrize("factor", [2.0, 4.0, 16.0])
def test_ntk_keeps_highest_frequency_and_stretches_lowest_by_factor(factor):
    config = rope_config("ntk", factor=factor)
    ntk, scaling = inverse_frequencies(config, HEAD_DIM, seq_len=8)
    default = default_inverse_frequencies(HEAD_DIM, 10000.0)
    assert scaling == 1.0
    assert ntk[0] == default[0] == 1.0
    torch.testing.assert_close(ntk[-1], default[-1] / factor, rtol=1e-6, atol=0)
    assert torch.all(ntk[1:] < default[1:])  # every other frequency is lowered, the lower ones more


def test_ntk_rotary_embedding_uses_the_ntk_frequencies():
    cos, sin = cos_sin(rope_config("ntk", factor=4.0), positions(40))
    angles = positions(40)[..., None].float() * ntk_inverse_frequencies(HEAD_DIM, 10000.0, 4.0)
    torch.testing.assert_close(cos[..., 0::2], angles.cos())
    torch.testing.assert_close(sin[..., 0::2], angles.sin())


@pytest.mark.parametrize("seq_len", [1, 17, 32])
def test_dynamic_is_plain_rope_bit_for_bit_up_to_max_position_embeddings(seq_len):
    dynamic = cos_sin(rope_config("dynamic", factor=4.0), positions(seq_len))
    default = cos_sin(rope_config("default"), positions(seq_len))
    assert torch.equal(dynamic[0], default[0]) and torch.equal(dynamic[1], default[1])


def test_dynamic_rescales_beyond_max_position_embeddings_as_transformers_does():
    config = rope_config("dynamic", factor=4.0)
    seq_len = 3 * config.max_position_embeddings
    cos, sin = cos_sin(config, positions(seq_len))
    expected_frequencies, _ = ROPE_INIT_FUNCTIONS["dynamic"](config, "cpu", seq_len=seq_len)
    angles = positions(seq_len)[..., None].float() * expected_frequencies
    torch.testing.assert_close(cos[..., 0::2], angles.cos())
    torch.testing.assert_close(sin[..., 0::2], angles.sin())
    plain_cos, _ = cos_sin(rope_config("default"), positions(seq_len))
    assert not torch.allclose(cos, plain_cos)


@pytest.mark.parametrize(
    "rope_parameters",
    [
        {"rope_type": "linear", "factor": 4.0},
        {"rope_type": "yarn", "factor": 4.0},
        {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0},
    ],
    ids=lambda parameters: parameters["rope_type"],
)
def test_transformers_rope_types_agree_with_their_init_functions(rope_parameters):
    config = tiny_config(rope_parameters={"rope_theta": 10000.0, **rope_parameters})
    seq_len = 2 * config.max_position_embeddings
    cos, sin = cos_sin(config, positions(seq_len))
    frequencies, attention_scaling = ROPE_INIT_FUNCTIONS[rope_parameters["rope_type"]](config, "cpu", seq_len=seq_len)
    angles = positions(seq_len)[..., None].float() * frequencies
    torch.testing.assert_close(cos[..., 0::2], angles.cos() * attention_scaling)
    torch.testing.assert_close(sin[..., 0::2], angles.sin() * attention_scaling)


def test_yarn_attention_scaling_multiplies_cos_and_sin():
    cos, _ = cos_sin(rope_config("yarn", factor=4.0), positions(3))
    _, expected_scaling = ROPE_INIT_FUNCTIONS["yarn"](rope_config("yarn", factor=4.0), "cpu")
    assert expected_scaling > 1.0
    torch.testing.assert_close(cos[0, 0], torch.full((HEAD_DIM,), expected_scaling))  # position 0: cos = 1 * scaling


def test_rope_scores_depend_on_relative_position_only():
    query, key = torch.randn(2, HEAD_DIM, dtype=torch.float64)
    rotations = rotation_matrices(*cos_sin(tiny_config(), positions(30)))  # (T, D, D)
    scores = (rotations @ query) @ (rotations @ key).T  # (T, T): query at i, key at j
    torch.testing.assert_close(scores[3, 10], scores[13, 20], atol=1e-5, rtol=0)  # cos/sin are float32
    torch.testing.assert_close(scores[0, 7], scores[22, 29], atol=1e-5, rtol=0)
    torch.testing.assert_close(scores[25, 2], scores[28, 5], atol=1e-5, rtol=0)


# 2-D RoPE


def positions_2d(coordinates: list[tuple[int, int]]) -> torch.Tensor:
    return torch.tensor(coordinates)[None]  # (1, T, 2)


def test_2d_halves_are_1d_ropes_over_half_the_head():
    grid = [(x, y) for x in range(5) for y in range(7)]
    cos, sin = cos_sin(tiny_config(), positions_2d(grid))
    half = default_inverse_frequencies(HEAD_DIM // 2, 10000.0)
    x, y = (torch.tensor([point[axis] for point in grid]).float() for axis in (0, 1))
    torch.testing.assert_close(sin[0, :, 0 : HEAD_DIM // 2 : 2], torch.sin(x[:, None] * half))
    torch.testing.assert_close(sin[0, :, HEAD_DIM // 2 :: 2], torch.sin(y[:, None] * half))
    torch.testing.assert_close(cos[0, :, HEAD_DIM // 2 :: 2], torch.cos(y[:, None] * half))


def test_2d_relativity():
    # R(x1, y1)^T R(x2, y2) = R(x2 - x1, y2 - y1)
    pairs = [((3, 1), (7, 9)), ((0, 0), (5, 2)), ((12, 4), (2, 11)), ((6, 6), (6, 6))]
    firsts, seconds = [first for first, _ in pairs], [second for _, second in pairs]
    differences = [(x2 - x1, y2 - y1) for (x1, y1), (x2, y2) in pairs]
    config = tiny_config()
    first_rotations = rotation_matrices(*cos_sin(config, positions_2d(firsts)))
    second_rotations = rotation_matrices(*cos_sin(config, positions_2d(seconds)))
    difference_rotations = rotation_matrices(*cos_sin(config, positions_2d(differences)))
    torch.testing.assert_close(
        first_rotations.transpose(-1, -2) @ second_rotations, difference_rotations, atol=1e-5, rtol=0
    )


def test_2d_rotations_are_orthogonal_and_distinct():
    grid = [(x, y) for x in range(24) for y in range(24)]
    cos, sin = cos_sin(tiny_config(), positions_2d(grid))
    rotations = rotation_matrices(cos, sin)
    identity = torch.eye(HEAD_DIM, dtype=torch.float64).expand_as(rotations)
    torch.testing.assert_close(rotations.transpose(-1, -2) @ rotations, identity, atol=1e-6, rtol=0)
    encodings = torch.cat([cos, sin], dim=-1)[0]  # (T, 2D)
    distances = torch.cdist(encodings, encodings) + torch.eye(len(grid)) * 1e9
    assert distances.min() > 1e-2  # every grid point has its own rotation: the encoding is invertible on the grid


def test_2d_x_and_y_are_not_interchangeable():
    cos_xy, _ = cos_sin(tiny_config(), positions_2d([(2, 5)]))
    cos_yx, _ = cos_sin(tiny_config(), positions_2d([(5, 2)]))
    assert not torch.allclose(cos_xy, cos_yx)


def test_2d_ntk_scales_the_base_of_each_half():
    cos, _ = cos_sin(rope_config("ntk", factor=4.0), positions_2d([(9, 0)]))
    half = ntk_inverse_frequencies(HEAD_DIM // 2, 10000.0, 4.0)
    torch.testing.assert_close(cos[0, 0, 0 : HEAD_DIM // 2 : 2], torch.cos(9 * half))


def test_2d_dynamic_rescales_each_axis_by_its_own_length():
    config = rope_config("dynamic", factor=4.0)
    long_x = [(x, x % 3) for x in range(3 * config.max_position_embeddings)]
    cos, _ = cos_sin(config, positions_2d(long_x))
    plain_cos, _ = cos_sin(rope_config("default"), positions_2d(long_x))
    assert not torch.allclose(cos[..., : HEAD_DIM // 2], plain_cos[..., : HEAD_DIM // 2])  # x is long: rescaled
    assert torch.equal(cos[..., HEAD_DIM // 2 :], plain_cos[..., HEAD_DIM // 2 :])  # y is short: plain


def test_last_dimension_1_is_1d():
    position_ids = positions(12)
    assert all(map(torch.equal, cos_sin(tiny_config(), position_ids[..., None]), cos_sin(tiny_config(), position_ids)))


# Through the model


def random_input_ids(batch_size: int, seq_len: int) -> torch.Tensor:
    return torch.randint(1, 99, (batch_size, seq_len), generator=torch.Generator().manual_seed(0))


def model_output(
    config: RoFormerConfig,
    input_ids: torch.Tensor,
    position_ids: torch.Tensor | None = None,
    attn_implementation: str | None = None,
) -> torch.Tensor:
    torch.manual_seed(0)
    model = RoFormerModel(config).eval()
    if attn_implementation is not None:
        model.set_attn_implementation(attn_implementation)
    with torch.no_grad():
        return model(input_ids=input_ids, position_ids=position_ids).last_hidden_state


@pytest.mark.parametrize(
    ("attention_type", "attn_implementation"), [("softmax", "eager"), ("softmax", "sdpa"), ("linear", None)]
)
def test_2d_model_outputs_are_unchanged_by_shifting_all_positions(attention_type, attn_implementation):
    # Large weights, so that attention is far from uniform and positions change the outputs visibly.
    config = tiny_config(initializer_range=0.3, attention_type=attention_type)
    grid = torch.tensor([(x, y) for x in range(4) for y in range(5)])  # a 4 x 5 table, one token per cell
    input_ids = random_input_ids(2, len(grid))
    output = model_output(config, input_ids, grid.expand(2, -1, -1), attn_implementation)
    shifted = model_output(config, input_ids, (grid + torch.tensor([7, -3])).expand(2, -1, -1), attn_implementation)
    torch.testing.assert_close(shifted, output, atol=2e-5, rtol=2e-5)
    transposed = model_output(config, input_ids, grid.flip(-1).expand(2, -1, -1), attn_implementation)
    assert (transposed - output).abs().max() > 1e-2  # the layout matters, not only the order


def test_dynamic_model_is_plain_model_bit_for_bit_up_to_max_position_embeddings():
    input_ids = random_input_ids(2, 32)  # max_position_embeddings of tiny_config
    plain = model_output(rope_config("default"), input_ids)
    dynamic = model_output(rope_config("dynamic", factor=2.0), input_ids)
    assert torch.equal(dynamic, plain)
    longer = random_input_ids(2, 48)
    assert not torch.allclose(
        model_output(rope_config("dynamic", factor=2.0), longer), model_output(rope_config("default"), longer)
    )


def test_rotary_module_follows_transformers_convention():
    """`rotary_emb(x, position_ids)` and `inv_freq`, as transformers' common test of RoPE scaling reads them: the
    default frequencies, "dynamic" never above them, and a changed config read at once."""
    config = tiny_config()
    rotary = RoFormerRotaryEmbedding(config)
    torch.testing.assert_close(rotary.inv_freq, default_inverse_frequencies(HEAD_DIM, 10000.0))
    cos, _ = rotary(torch.empty(1, dtype=torch.float16), positions(4))
    assert cos.dtype == torch.float32  # the rotation is computed in float32 whatever the activations' dtype
    torch.testing.assert_close(cos[..., 0::2], (positions(4)[..., None].float() * rotary.inv_freq).cos())
    dynamic = RoFormerRotaryEmbedding(rope_config("dynamic", factor=10.0))
    dynamic(torch.empty(1), positions(3 * config.max_position_embeddings))
    assert (dynamic.inv_freq <= rotary.inv_freq).all()
    config.rope_parameters = {"rope_type": "ntk", "rope_theta": 10000.0, "factor": 4.0}
    torch.testing.assert_close(rotary.inv_freq, ntk_inverse_frequencies(HEAD_DIM, 10000.0, 4.0))


def test_rope_type_loads_from_pretrained_override(tmp_path):
    RoFormerModel(tiny_config()).save_pretrained(tmp_path)
    model = RoFormerModel.from_pretrained(
        tmp_path, rope_parameters={"rope_type": "ntk", "rope_theta": 10000.0, "factor": 4.0}
    )
    cos, _ = model.rotary_emb(torch.empty(0), positions(5))
    expected = (positions(5)[..., None].float() * ntk_inverse_frequencies(HEAD_DIM, 10000.0, 4.0)).cos()
    torch.testing.assert_close(cos[..., 0::2], expected)
    assert not any("inv_freq" in name for name in model.state_dict())  # nothing of RoPE in checkpoints


# Bad input


@pytest.mark.parametrize("shape", [(1, 4, 3), (1, 4, 0), (1, 4, 2, 1), (4,)])
def test_position_ids_of_wrong_shape_raise(shape):
    with pytest.raises(ValueError, match="position_ids must have shape"):
        cos_sin(tiny_config(), torch.zeros(shape, dtype=torch.long))


def test_model_rejects_position_ids_with_three_coordinates():
    model = RoFormerModel(tiny_config())
    with pytest.raises(ValueError, match="position_ids must have shape"):
        model(input_ids=random_input_ids(1, 4), position_ids=torch.zeros(1, 4, 3, dtype=torch.long))


def test_2d_positions_need_head_dim_divisible_by_4():
    config = tiny_config(hidden_size=12, num_attention_heads=2)  # head_dim 6
    with pytest.raises(ValueError, match="divisible by 4"):
        cos_sin(config, torch.zeros(1, 3, 2, dtype=torch.long))


@pytest.mark.parametrize(
    ("rope_parameters", "message"),
    [
        ({"rope_type": "unknown", "rope_theta": 10000.0}, "Unknown rope_type"),
        ({"rope_type": "ntk", "rope_theta": 10000.0, "factor": 0.0}, "factor must be > 0"),
        ({"rope_type": "dynamic", "rope_theta": 10000.0, "factor": -2.0}, "factor must be > 0"),
        ({"rope_type": "ntk", "rope_theta": 10000.0}, "needs a scaling factor"),
        ({"rope_type": "default", "rope_theta": 0.0}, "rope_theta must be > 0"),
    ],
)
def test_bad_rope_parameters_raise(rope_parameters, message):
    with pytest.raises(ValueError, match=message):
        tiny_config(rope_parameters=rope_parameters)


def test_unknown_attention_type_raises():
    with pytest.raises(ValueError, match="Unknown attention_type"):
        tiny_config(attention_type="performer")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rotating_queries_and_keys_together_gives_apply_rotary_bit_for_bit(dtype):
    """`rotate` on queries and keys stacked `(B, T, 2, nh, hs)`, with the rotation made once (`rotation_of`), and its
    real form (what runs under torch.compile), give exactly what `apply_rotary` gives each `(B, nh, T, hs)` alone."""
    torch.manual_seed(0)
    cos, sin = cos_sin(tiny_config(), positions(11))
    stacked = torch.randn(1, 11, 3, 2, HEAD_DIM).to(dtype)[:, :, :2]  # a slice of query, key, value: strided
    expected = [apply_rotary(stacked[:, :, index].transpose(1, 2), cos, sin).transpose(1, 2) for index in (0, 1)]
    for rotation in (rotation_of(cos, sin), (cos, sin)):
        rotated = rotate(stacked, rotation)
        assert rotated.dtype == dtype
        for index in (0, 1):
            torch.testing.assert_close(rotated[:, :, index], expected[index], atol=0, rtol=0)
