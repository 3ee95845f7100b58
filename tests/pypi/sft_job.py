"""A TRL user's SFT job, the same script under `accelerate launch` and trl-launch.

Usage: sft_job.py OUTPUT_DIR [--max_steps N] [--ddp_backend gloo] [--use_cpu]
                  [--environment_only]

TRL's own SFTTrainer fine-tunes a tiny Llama that the script builds from a
seed (nothing can be downloaded from a hub here), with a word-level
tokenizer made from its own small corpus. Nothing in it knows which
launcher started it: it is what a user's train.py does.

Each rank writes OUTPUT_DIR/rank-R.json: its environment and what
Accelerate made of it (distributed type, processes, DeepSpeed stage, ...).
Rank 0 writes OUTPUT_DIR/weights.safetensors: the trained weights, gathered
from every rank (a ZeRO-3 model's shards too).
"""

import argparse
import json
import os

import torch
from accelerate import PartialState
from datasets import Dataset
from safetensors.torch import save_file
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import (LlamaConfig, LlamaForCausalLM,
                          PreTrainedTokenizerFast, set_seed)
from trl import SFTConfig, SFTTrainer

SUBJECTS = ["the cat", "a dog", "the model", "our launcher", "every rank"]
VERBS = ["sees", "trains", "starts", "stops", "finds"]
OBJECTS = ["the port", "a gradient", "the weights", "its peers", "the store"]


def corpus():
    return [f"{s} {v} {o} ." for s in SUBJECTS for v in VERBS for o in OBJECTS]


def tiny_tokenizer(texts):
    vocab = {"<pad>": 0, "<eos>": 1, "<unk>": 2}
    for word in sorted({w for text in texts for w in text.split()}):
        vocab[word] = len(vocab)
    model = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    model.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=model, pad_token="<pad>",
                                   eos_token="<eos>", unk_token="<unk>")


def tiny_model(vocab_size):
    set_seed(1234)
    config = LlamaConfig(vocab_size=vocab_size, hidden_size=32,
                         intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=32, pad_token_id=0,
                         eos_token_id=1, bos_token_id=1)
    return LlamaForCausalLM(config)


def accelerator_facts(trainer):
    accelerator = trainer.accelerator
    state = accelerator.state
    plugin = state.deepspeed_plugin
    return {
        "distributed_type": str(state.distributed_type),
        "num_processes": state.num_processes,
        "process_index": state.process_index,
        "local_process_index": state.local_process_index,
        "device": str(state.device),
        "backend": str(state.backend),
        "mixed_precision": str(state.mixed_precision),
        "zero_stage": plugin.zero_stage if plugin is not None else None,
        "fsdp": getattr(accelerator.state, "fsdp_plugin", None) is not None,
        "torch_world_size": torch.distributed.get_world_size()
        if torch.distributed.is_initialized() else 1,
    }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("output_dir")
    parser.add_argument("--max_steps", type=int, default=6)
    parser.add_argument("--ddp_backend", default=None)
    parser.add_argument("--use_cpu", action="store_true")
    parser.add_argument("--environment_only", action="store_true",
                        help="write rank-R.json's environment and stop")
    args = parser.parse_args()
    if args.environment_only:
        os.makedirs(args.output_dir, exist_ok=True)
        rank = int(os.environ.get("RANK", "0"))
        with open(os.path.join(args.output_dir, f"rank-{rank}.json"), "w",
                  encoding="utf-8") as out:
            json.dump({"environment": dict(os.environ)}, out, indent=1, sort_keys=True)
        return

    texts = corpus()
    tokenizer = tiny_tokenizer(texts)
    model = tiny_model(len(tokenizer))
    dataset = Dataset.from_dict({"text": texts})
    config = SFTConfig(
        output_dir=args.output_dir, max_steps=args.max_steps,
        per_device_train_batch_size=2, gradient_accumulation_steps=1,
        learning_rate=5e-3, lr_scheduler_type="constant", warmup_steps=0,
        logging_steps=1, save_strategy="no", report_to=[], seed=7,
        data_seed=7, max_length=16, ddp_backend=args.ddp_backend,
        dataloader_num_workers=0, use_cpu=args.use_cpu,
        disable_tqdm=True)
    trainer = SFTTrainer(model=model, args=config, train_dataset=dataset,
                         processing_class=tokenizer)
    trainer.train()

    rank = PartialState().process_index
    os.makedirs(args.output_dir, exist_ok=True)
    facts = {"environment": dict(os.environ), "accelerate": accelerator_facts(trainer),
             "losses": [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]}
    with open(os.path.join(args.output_dir, f"rank-{rank}.json"), "w", encoding="utf-8") as out:
        json.dump(facts, out, indent=1, sort_keys=True)

    # Every rank takes part: a ZeRO-3 model's parameters are gathered.
    weights = trainer.accelerator.get_state_dict(trainer.model_wrapped)
    if rank == 0:
        weights = {name: tensor.detach().to(torch.float32).contiguous().clone()
                   for name, tensor in weights.items()}
        save_file(weights, os.path.join(args.output_dir, "weights.safetensors"))
    PartialState().wait_for_everyone()


if __name__ == "__main__":
    main()
