"""What a user passes to a RoFormer model and its labels: their checks (the losses that read the labels are in
`losses.py`). A mistake raises a ValueError that names it and the fix, where torch would raise an IndexError from deep
inside an embedding, or a device-side assert.

Shape and dtype checks cost nothing and always run. Checks of values (the range of ids and labels) read the tensor,
which is a device sync on an accelerator and a graph break under `torch.compile`; they run only on CPU tensors and
outside compilation (`reads_values`), where torch's own error would be an unreadable IndexError.
"""

import torch

from .configuration import RoFormerConfig

# What `check_labels` tells to do, per kind of head.
TOKEN_LABELS_FIX = "labels are token ids of this model's vocabulary, from the same tokenizer as input_ids."
CLASS_LABELS_FIX = (
    "number the classes from 0 and give the model as many outputs as classes (num_labels=... in from_pretrained or "
    "the config)."
)
CHOICE_LABELS_FIX = "a label is the index of the right choice, below num_choices (input_ids.shape[1])."


def describe(value: object) -> str:
    """How an error message names what was passed: its type, or a tensor's dtype."""
    return f"a tensor of {value.dtype}" if isinstance(value, torch.Tensor) else f"a {type(value).__name__}"


def reads_values(tensor: torch.Tensor) -> bool:
    """Whether the value checks may read `tensor`: on the CPU (no device sync), outside `torch.compile` (no graph
    break), and not empty."""
    return tensor.device.type == "cpu" and not torch.compiler.is_compiling() and tensor.numel() > 0


def check_input_ids(input_ids: torch.Tensor, vocab_size: int) -> None:
    """Raises a ValueError naming the fix when `input_ids` cannot index the embedding table."""
    if not isinstance(input_ids, torch.Tensor) or input_ids.dtype not in (torch.long, torch.int):
        raise ValueError(
            f"input_ids must be a LongTensor of token ids, got {describe(input_ids)}: call the tokenizer with "
            "return_tensors='pt', or convert with torch.tensor(ids, dtype=torch.long)."
        )
    if input_ids.dim() != 2:
        raise ValueError(
            f"input_ids must have shape (batch_size, seq_len), got {tuple(input_ids.shape)}: add a batch dimension "
            "with input_ids[None] or use return_tensors='pt' in the tokenizer."
        )
    if not reads_values(input_ids):
        return  # an empty input: check_side_inputs names its shape
    smallest, largest = int(input_ids.min()), int(input_ids.max())
    if smallest < 0 or largest >= vocab_size:
        raise ValueError(
            f"input_ids hold ids from {smallest} to {largest}, but the model's vocabulary has ids 0 to "
            f"{vocab_size - 1}: use the tokenizer that belongs to this checkpoint, or call "
            "model.resize_token_embeddings(len(tokenizer)) after adding tokens."
        )


def check_side_inputs(
    config: RoFormerConfig,
    input_shape: tuple[int, int],
    past_len: int,
    attention_mask: torch.Tensor | None,
    token_type_ids: torch.Tensor | None,
    position_ids: torch.Tensor | None,
) -> None:
    """Raises a ValueError naming the fix when the input is empty or a side input does not fit its
    (batch_size, seq_len). Shape checks, and the range of `token_type_ids` where `reads_values` allows."""
    batch_size, seq_len = input_shape
    if batch_size == 0 or seq_len == 0:
        raise ValueError(
            f"The input has shape {input_shape} (batch_size, seq_len), but the model needs at least one sequence of at "
            "least one token: skip empty batches, and encode texts with the tokenizer, whose [CLS] and [SEP] keep "
            "every sequence non-empty."
        )
    for name, value in (("attention_mask", attention_mask), ("token_type_ids", token_type_ids),
                        ("position_ids", position_ids)):  # fmt: skip
        if value is not None and not isinstance(value, torch.Tensor):
            raise ValueError(f"{name} must be a tensor, got {describe(value)}: use return_tensors='pt'.")
    if attention_mask is not None:
        check_attention_mask(config, attention_mask, input_shape, past_len)
    if token_type_ids is not None:
        check_token_type_ids(token_type_ids, input_shape, config.type_vocab_size)
    shape = None if position_ids is None else tuple(position_ids.shape)
    # One row of positions (batch size 1) may serve the whole batch.
    if shape is not None and (len(shape) not in (2, 3) or shape[0] not in (1, batch_size) or shape[1] != seq_len):
        raise ValueError(
            f"position_ids has shape {shape} but the input has shape {input_shape}: pass "
            f"({batch_size}, {seq_len}) positions (or (1, {seq_len}) for every sequence), or ({batch_size}, {seq_len}, "
            "2) for 2-D positions."
        )


def check_token_type_ids(token_type_ids: torch.Tensor, input_shape: tuple[int, int], type_vocab_size: int) -> None:
    """Raises a ValueError naming the fix when `token_type_ids` do not fit the input or the token-type table."""
    if tuple(token_type_ids.shape) != input_shape:
        raise ValueError(
            f"token_type_ids has shape {tuple(token_type_ids.shape)} but the input has shape {input_shape}: "
            "pass one segment id per token."
        )
    if not reads_values(token_type_ids):
        return
    smallest, largest = int(token_type_ids.min()), int(token_type_ids.max())
    if smallest < 0 or largest >= type_vocab_size:
        raise ValueError(
            f"token_type_ids must be in [0, {type_vocab_size}) (config.type_vocab_size), got values from "
            f"{smallest} to {largest}."
        )


def check_attention_mask(
    config: RoFormerConfig, attention_mask: torch.Tensor, input_shape: tuple[int, int], past_len: int
) -> None:
    """Raises a ValueError naming the fix when `attention_mask` does not fit the input (shapes only)."""
    batch_size, seq_len = input_shape
    key_len = past_len + seq_len
    if attention_mask.dim() == 2:
        if tuple(attention_mask.shape) != (batch_size, key_len):
            raise ValueError(
                f"attention_mask has shape {tuple(attention_mask.shape)} but the input has shape {input_shape}"
                + (f" after {past_len} cached tokens" if past_len else "")
                + f": pass a mask of shape ({batch_size}, {key_len}), 1 for tokens and 0 for padding."
            )
        return
    if attention_mask.dim() != 4:
        raise ValueError(
            f"attention_mask must have shape (batch_size, seq_len) (or be a prepared 4-D mask), got "
            f"{tuple(attention_mask.shape)}."
        )
    if config.attention_type == "linear":
        raise ValueError(
            "Linear attention excludes padding through a (batch_size, seq_len) attention_mask of 1 for tokens and "
            f"0 for padding; it cannot use a prepared 4-D mask of shape {tuple(attention_mask.shape)}."
        )
    # (batch, heads, queries, keys); every size but the keys' may be 1 and broadcast.
    allowed = ((1, batch_size), (1, config.num_attention_heads), (1, seq_len), (key_len,))
    if any(size not in sizes for size, sizes in zip(attention_mask.shape, allowed, strict=True)):
        raise ValueError(
            f"The 4-D attention_mask has shape {tuple(attention_mask.shape)}, but this input needs "
            f"({batch_size}, 1, {seq_len}, {key_len}) (batch_size, 1, seq_len, "
            + ("cached + new tokens" if past_len else "seq_len")
            + "; sizes other than the last may be 1): pass a mask of that shape, or a (batch_size, seq_len) mask of "
            "1 for tokens and 0 for padding."
        )


def check_labels(labels: torch.Tensor, num_classes: int, fix: str) -> None:
    """Raises a ValueError naming `fix` when class-id `labels` are not in [0, num_classes) or -100 (ignored by the
    loss), where torch would raise an IndexError. The range is checked where `reads_values` allows."""
    if not isinstance(labels, torch.Tensor) or labels.is_floating_point() or labels.dtype == torch.bool:
        raise ValueError(
            f"labels must be a LongTensor of class ids, got {describe(labels)}: convert them with "
            "torch.tensor(labels, dtype=torch.long)."
        )
    if not reads_values(labels):
        return
    outside = (labels >= num_classes) | ((labels < 0) & (labels != -100))
    if outside.any():
        raise ValueError(
            f"labels must be in [0, {num_classes}) or -100 (left out of the loss), got {int(labels[outside][0])}: "
            f"{fix}"
        )


def check_multiple_choice_input(choices: object) -> None:
    """Raises a ValueError naming the shape RoFormerForMultipleChoice needs when `choices` (its `input_ids`, or
    `inputs_embeds`) lack the choice dimension."""
    if not isinstance(choices, torch.Tensor) or choices.dim() < 3:
        shape = tuple(choices.shape) if isinstance(choices, torch.Tensor) else describe(choices)
        raise ValueError(
            f"RoFormerForMultipleChoice takes input_ids of shape (batch_size, num_choices, seq_len), got {shape}: "
            "encode each (context, choice) pair with return_tensors='pt' and stack the choices of a question."
        )
