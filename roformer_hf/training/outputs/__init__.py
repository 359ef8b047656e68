"""What a run writes, and every refusal that keeps a user's files and checkpoints whole: the answer to "why did my run
refuse to start, stop, or refuse to resume?". Each refusal is one line naming the problem and the fix (a
`ScriptError`, which `script_runner.run_script` prints), made by the module named beside it:

Before a run reads anything:
- the output folder is held by another run, or was deleted, moved or replaced during this one (`locks`); it is a file,
  a link to nothing, or its lock file cannot be written (`locks`);
- it holds a file of the user's (not proven a run's by the record: `output_record.run_entries`) that the run would
  write over (`output_record.user_file_clashes`) or delete with an earlier run's checkpoint
  (`output_record.user_files_in_run_folders`), a record of what runs wrote that is a link or broken by hand
  (`output_record.refuse_untrusted_record`), an earlier run (unless `--overwrite_output_dir` or
  `--resume_from_checkpoint`), checkpoint or stage folders that are links or files
  (`output_folder.refuse_foreign_run_folders`): `output_folder.refuse_output_dir` makes these before torch loads too;
  or too little free space for what the run writes (`run_outputs.check_free_space`);
- an input of the run (model, config, tokenizer, data, the checkpoint resumed) is a path the run would write over,
  delete or write into, its caches included (`written_files.check_inputs_are_not_outputs`).

Before a run resumes:
- the checkpoint named does not exist, or `--resume_from_checkpoint true` finds no complete one (`resume`);
- it is damaged: its manifest's files missing, of another size or checksum, or of another step (`checkpoints`); one
  without a manifest is passed by with `true` (an unfinished checkpoint of the run), and given by path is resumed
  from unverified unless a file of it cannot be read (`checkpoints.check_readable`);
- it was trained with other settings, another model or another vocabulary, or its training data changed
  (`resume.check_resume`, one table of rules: `resume.RESUME_RULES`);
- the run is finished (its checkpoint at the end of its steps or epochs): one line, nothing changed, exit status 0
  (`resume.check_not_finished`); stopped there before its final save, it trains no step and saves what is missing
  (`resume.train_from`);
- a pickle file in it would run code when loaded (`pickle_refusal`, turned into one line by `script_runner.guard_run`).

During a run:
- the weights turned NaN or infinite: the run stops at that step and saves nothing of it (`divergence`);
- Ctrl-C or SIGTERM: a stop at the next step boundary with a complete checkpoint and the resume command, a second
  signal a stop at once (`interrupts`);
- a full disk: one line naming the newest complete checkpoint and the resume command (`script_runner.guard_run`).

What a run writes: checkpoints written whole with their manifest, last (`checkpoints`), the final model replacing the
old one file by file (`run_outputs`), and the record of what runs wrote in the folder, each entry by its content, the
only files a later run replaces or deletes, and only while they match it (`output_record`, `written_files`).
"""
