/* SPDX-License-Identifier: MIT */
/*
 * wal.c - the write-ahead (redo) log, DIR/.fstx/wal: the default way of
 * every transaction it can take (data, clone ranges, xattrs, new files,
 * symlinks and directories, removals, renames, links).
 *
 * The rules below hold for every file of the log; wal.h is its only
 * interface, wal_int.h what its files share.  This file: commit (W1, W3,
 * W7, W10), conflicts (W4), checkpoint (W6, W11), recovery (W5) and the
 * fx_wal_* calls.  wal_rec.c: the format of .fstx/wal (W2), reading,
 * replaying and writing records.  wal_apply.c: changes in place and the
 * help pass (W4).  wal_note.c: the hint and the state words in
 * .fstx/walsync (W2, W5, W8, W9, W12).  wal_group.c: group commit (W3).
 * wal_stage.c: the names a record makes, staged before it (W1, W2).
 * wal_debt.c: what a checkpoint without barriers leaves unsynced (W11).
 *
 * Rules.  Each is relied on by recovery; a change to one is a format change.
 *
 *  W1. trans.c offers every transaction to the log first, whatever its
 *      flags (FSTX_UT_WAL changes nothing; fx_wal_auto 0 offers only
 *      those with FSTX_UT_WAL or FSTX_UT_LAZY, for tests).
 *      A transaction takes this path only when trans.c finds it eligible:
 *      every op predicted to succeed, or to fail where the transaction
 *      lets it (no FAIL_ON condition fires, not strict: the op runs
 *      nothing, plan.h fx_pop_dead(), and its result is the prediction,
 *      as in the undo way; a close, pwrite or clone range through a
 *      slot its failed open left shut is EBADF, plan.c, and so is a pwrite
 *      through a read-only open, trans.c wal_fit(); test_wal
 *      predicted_fail_log, fail_fast), at most
 *      fx_wal_big bytes of data logged (W13's staged overwrites and
 *      W22's whole new files are not; W22 takes new files once the data
 *      passes fx_wal_large; a large overwrite logged is written twice
 *      and flushed twice, as the undo way's before-image and data are,
 *      without reading the old bytes: test_wal big_logged), nothing
 *      past FX_WAL_MAX_OFF (replay refuses entries that are), its name
 *      steps only new files (open O_CREAT of an absent name) and new
 *      symlinks (either may then be renamed, also over an old one), new
 *      directories (mkdir), and removals (unlink, or the old file a rename
 *      replaces) of objects of the tree that are not directories and
 *      that it does not write (one with other names too, also written
 *      by a name it keeps: W17), and of
 *      directories the plan finds empty (rmdir; the one that removes a
 *      directory is named .fstx/wnew/SALT-OFFSET-STEP-x, which a checkpoint
 *      removes alone: a file another process put in it stays, domain.c
 *      FX_WNEW_KEEP; test_wal names_rmdir; while a record of the log makes
 *      a directory in place, which replay knows by its name only, the
 *      transaction checkpoints first, moves_first(): names_rmdir_made;
 *      W24 for staged ones); its other changes pwrites
 *      at fixed offsets into existing or new regular files (O_APPEND
 *      ones too, W14), truncates of them (also by O_TRUNC), setxattr
 *      of small user.* xattrs and removexattr of user.* ones (replay
 *      finds one gone already done: test_wal removexattr_log); a removal,
 *      or a setxattr with XATTR_CREATE or XATTR_REPLACE, only where the
 *      xattr is as it needs (as an earlier op of the transaction left it,
 *      else as the tree has it; logged as a set or removal, which succeed
 *      either way); one that would fail fails the transaction if it is
 *      strict (fail_fast() below), else it is a dead op with ENODATA or
 *      EEXIST, as the planner's are (trans.c xattr_as_needed(); test_wal
 *      xattr_flags_log, predicted_fail_log);
 *      and renames of and hard links to files and symlinks of the tree
 *      (W15, W16), renames of the new directories it makes (W18) and of
 *      directories of the tree (W20), exchanges (W21), and clone ranges
 *      (W19).
 *      trans.c wal_steps_ok(), wal_stage.c fx_w_removal_declined(),
 *      fx_w_move_declined().  A transaction predicted to fail (its ops
 *      up to the failing one as this rule takes them) writes nothing
 *      here: trans.c fail_fast() returns the error, no op runs.
 *      Each such change is a "set": the bytes, the size or the xattr value
 *      it leaves do not depend on what was there before; a new name is
 *      made only where no object was; a record moves a directory of the
 *      tree only alone and first in its log (W20), and exchanges two
 *      names only in one directory (W21).
 *  W2. Layout: sector 0 holds the header (magic "FSTXWAL1", version, salt,
 *      CRC-32C); records start at byte 1024.  The hint (W4, W5) and the
 *      records' state words live in .fstx/walsync, notes for this boot that
 *      are never synced, so a record's barrier writes the record's pages
 *      only, and no page of the log is written again after its barrier.  A
 *      state word carries the salt of its log: a word of another salt, or
 *      none, says PENDING (open), so appending a record writes no word;
 *      only APPLIED and CANCELLED are written.
 *      A record is a 32-byte header (magic "FXW1", entry count, payload
 *      length, the header's salt, CRC-32C over the header with crc 0 and
 *      the payload), then its entries, each 8-byte aligned: a 40-byte entry
 *      header (kind, path length, inode number, two arguments, name length),
 *      the canonical path, the xattr name, the data.  The log is the run of
 *      valid records from byte 1024 up to the first invalid one; a record
 *      with another salt is invalid.  The file grows in steps of W_GROW
 *      bytes of written zeros beyond the last record, so that most records
 *      overwrite allocated blocks and their fdatasync flushes data only,
 *      not the file's size; it is shortened only by a checkpoint with
 *      barriers, once its new header is durable (W6), and only when a
 *      large record grew it past fx_wal_keep (128 MiB), back to that (what
 *      lies beyond the header then is of the old salt, whatever power
 *      loss keeps of the cut).
 *      A new file is made before its record, empty, as a staged file
 *      .fstx/wnew/SALT-OFFSET-STEP (a name no other record uses), so that
 *      the record names its inode (a new symlink too, with its target,
 *      which its entry holds); its data, size and xattrs are entries
 *      of the record like any other, naming it by the name the transaction
 *      leaves it at.  A new directory that holds no other new directory
 *      is staged too, as a directory .fstx/wnew/SALT-OFFSET-STEP made
 *      before the record, and the new files and symlinks made right in it
 *      are made in it under their own names (staged as
 *      .fstx/wnew/SALT-OFFSET-STEP/NAME; one whose staged name would pass
 *      W_NAME_MAX bytes is staged alone), so that one rename puts them all
 *      in place (fx_w_batch_dirs(); test_wal names_dir_batch).  A staged
 *      object takes the group of a setgid directory it lands in (and a
 *      directory S_ISGID), as the kernel gives one made there
 *      (fx_w_inherit_groups(); cli.bats "setgid directory").  After the
 *      barrier (W4) removed names are renamed to
 *      .fstx/wnew/SALT-OFFSET-STEP too, where their objects live until the
 *      checkpoint (W6), so that no inode number a record names is reused
 *      meanwhile; then new directories are made at their names (a staged
 *      one renamed there) and the staged files renamed to theirs.
 *  W3. Commit: under the lock the record is written whole at the log's
 *      end (open: no state word, W2) and the hint's END moves past it;
 *      then the lock is dropped for fdatasync(wal), the commit point and
 *      the transaction's one barrier.  Writers meet for it at the head
 *      of .fstx/walsync (byte locks), and one fdatasync serves every
 *      record written before it began; a writer that finds a barrier
 *      under way waits for that barrier only, and a syncer that saw
 *      several writers waits (a bounded time) for them to come back with
 *      their next records (group commit, wal_group.c).  Nothing
 *      changes in place before the record's barrier has returned (to its
 *      writer or to a helper, W4), so power loss never finds an in-place
 *      change without its record.  Only the staged new files, which no
 *      name shows yet (W2), get their data before it: a record of
 *      FX_W_OVERLAP bytes or more starts its write-out
 *      (sync_file_range) and the writer writes the new files meanwhile
 *      (fx_w_apply_new(); all again after the barrier should one fail).
 *      A record that cannot be written gets its header zeroed (it is the
 *      last; the log ends before it).  A record whose barrier fails is
 *      CANCELLED, in its state word and in the log itself (its header's
 *      state field, outside the CRC: wal_rec.c fx_w_rec_cancel()), unless
 *      a helper applied it meanwhile (then it is committed); the handle
 *      latches the error.  A failed barrier may leave the log's pages clean
 *      in the page cache but not on the disk (a failed write-back is
 *      reported once per open file, and those pages are not written
 *      again), so a later barrier on a descriptor that sees no error would
 *      leave the log on the disk ending at the failed record, and every
 *      record after it, acknowledged or not, lost to replay.  So every
 *      barrier of the log that fails (a group one, a help pass's, a
 *      checkpoint's, recovery's: fx_w_log_sync()) publishes in the group
 *      notes (wal_group.c) the log from the last record known durable on
 *      (from its header on, for a checkpoint's new header), and before
 *      anyone applies a record in place (its writer after its barrier, a
 *      helper, the failed writer's cancel) it writes that range again from
 *      the page cache and syncs it (fx_w_mend(), under the lock), cancel
 *      included; a mend that fails fails the transaction as its barrier
 *      would.  A lock holder that applies records it did not just sync
 *      itself (a help pass, a commit paying debts) takes its barrier
 *      through the group (fx_w_barrier()), so it waits for a group barrier
 *      under way and finds its failure published (a syncer stopped in its
 *      barrier, SIGSTOP, then holds up such a lock holder as a stopped
 *      lock holder holds up everyone).  A syncer of a log a
 *      checkpoint has replaced leaves the current log's notes as they are.
 *      Replay after power loss then skips the cancelled record and goes on
 *      past it (test_wal cancelled_stays_cancelled,
 *      failed_barrier_rewritten, failed_flush_published,
 *      older_log_syncer, helper_waits_failed_barrier).  Not covered: power
 *      loss before any mend succeeds (every barrier fails too): the failed
 *      record is applied then if power loss kept it whole, and the log ends
 *      before it if not, and no transaction after it returned 0.
 *  W4. Under the lock again, the writer applies its record in place,
 *      unless a helper did (its record lies below APPLIED then): the hint's
 *      busy word set, the changes, then APPLIED moves past the record if it
 *      was the first open one (else its state word says APPLIED) and busy
 *      is cleared, in one hint write.  Appliers hold the lock exclusively,
 *      so a hint found busy by the next lock holder (writer or reader) was
 *      left by a dead or failed applier, and that holder helps before
 *      anything else.  Help: fdatasync(wal), then every open record (PENDING
 *      or LAZY) from APPLIED on, in log order, under the busy word; then
 *      APPLIED = END and busy cleared.  A help pass skips a change that a
 *      later record of the pass overwrites whole (coalescing, see
 *      fx_w_help()).  A transaction that would touch (change or assert on,
 *      or read as an xattr op it made dead does, trans.c wal_fit(); test_wal
 *      dead_xattr_conflict) an inode that an open record changes, or that finds an open record
 *      making a name (its plan saw the name absent), first helps, and plans again
 *      (the check reads the records from APPLIED to END, and their state
 *      words, in two reads when they span at most fx_wal_window bytes).
 *      So records that share an inode are applied in log order, and records
 *      on disjoint inodes commute.  Should an in-place change fail, busy
 *      stays set, the handle latches the error and the next lock holder
 *      applies the record again.
 *  W5. Within one mount of one boot the page cache holds every applied
 *      change, and the hint (END, APPLIED, the boot id and the mount's
 *      unique id, domain.c fx_epoch_id()) is the truth: a PENDING record
 *      whose writer was killed is applied by the next helper (a
 *      conflicting transaction, a checkpoint, fstx_recover(), a flush).  When the
 *      hint is invalid or names another boot or mount (a disk that lost
 *      its cache without a reboot comes back as a new mount), power loss
 *      may have lost applied changes: recovery fdatasyncs the log (a
 *      writer on another mount of the filesystem may be at its barrier),
 *      replays every valid record from byte 1024
 *      in order, whatever its state word (not durable), and sets END and
 *      APPLIED after the last; the group notes are forgotten first
 *      (wal_group.c fx_w_group_forget(): their durable end and failed
 *      range are of the other boot or mount; test_wal
 *      group_note_other_boot).  Where there is no boot id to read (no
 *      /proc: a chroot; ENOENT), the notes are of no epoch, no hint is
 *      trusted, and every transaction takes the undo way (whose rule 5c
 *      then trusts no page cache either): test_wal epoch_unknown.
 *      Replay is idempotent: a set applied twice,
 *      or over a partly applied or partly lost state, leaves the state
 *      after it, and replaying the records in order leaves the state after
 *      the last.  An entry names its file by canonical path (opened
 *      beneath the domain, no symlinks) and inode number; another inode
 *      there is -ESTALE, and a malformed entry in a record whose CRC holds
 *      -EUCLEAN: recovery stops before changing anything of that entry.
 *      A name entry is replayed by what is there (fx_w_name_apply()): a
 *      new file's name holding its inode is done; else its staged file is
 *      renamed there; a staged file lost with its name (neither was
 *      durable) is made again, empty (a symlink: with the target of its
 *      entry; test_wal names_symlink), and linked there under its staged
 *      name too, which keeps that link until the checkpoint that recovery
 *      then runs (W6), so that a replay cut short and run again knows the
 *      new inode for the record's own (d->wal_remap, also for later
 *      entries naming that inode; a file of a staged directory that power
 *      loss took is made again in that directory, made again as well).
 *      A directory is known by its name and kind; a staged one whose name
 *      is free is its staged directory renamed there, if that is still in
 *      .fstx/wnew/, else made again.  Any other object at a new name is -ESTALE (test_wal
 *      names_replay_lost).  A removal is done when its name holds another
 *      inode or none.  Entries on an inode that a later record removes are
 *      skipped (whatever they leave is moot, and its name may hold a later
 *      object): the removals of the records are read before any record is
 *      replayed (fx_w_gone_scan(); in a help pass those of records not
 *      cancelled).  test_wal names_replace.
 *  W6. Checkpoint (the log holds more than fx_wal_max bytes of records
 *      (without barriers when W11 allows); or
 *      before a transaction that takes the undo way of journal.c, which
 *      must not be replayed over; or fstx_recover()): help (W4), one
 *      fsync of each file a record of the log names, of each directory
 *      holding a new or removed name, of each new directory and, when a
 *      name moved to or from .fstx/wnew/, of that directory (a rename
 *      between two directories is durable once both are; test_powerloss
 *      power_loss_debt): every applied change durable in place
 *      (syncset.h: not syncfs, which would wait for every other
 *      process's dirty pages too); then a new header
 *      with a new salt and a hint with END = APPLIED = 1024 in one write,
 *      fdatasync(wal); then .fstx/wnew/ is emptied (no record names its
 *      files any more; one left by power loss is garbage).  A writer that
 *      finds the salt changed when it takes the lock back knows its record
 *      was applied.  The old records that
 *      remain carry the old salt; a torn header empties the log; either
 *      way their changes were durable already.  The first header of a new
 *      log is written the same way, without its fdatasync (the first
 *      record's barrier covers the whole file); the log's name was made
 *      durable by the domain's first open (domain.c: .fstx/ fsynced).
 *  W7. Crash-only transactions (FSTX_UT_NOSYNC) skip the barrier of W3 and
 *      keep the lock throughout, so the hint that moves END past their
 *      record already says busy.  Checkpoints and helpers keep their
 *      barriers: they may apply records of durable transactions.  Nothing
 *      reads state words below APPLIED (APPLYING, 3, and LAZY, 4, are
 *      words of older versions of these rules; read as open).
 *  W8. The hint carries a clean word: 1 says that no wedge mark, no hot
 *      journal and no progress mark exists.  A lock holder that finds the
 *      hint of this boot saying clean skips looking for them (three system
 *      calls); one that looked and found none sets the word.  Whoever is
 *      about to make one of them (the undo way, before its checkpoint and
 *      journal; a wedge) first writes the hint with the word 0, and a lock
 *      holder that reloads the hint takes the word from it, so a later
 *      hint never says clean over them.  The word lives in the page cache
 *      of this boot like the rest of the hint; after a reboot the hint is
 *      not trusted and the checks run.  A wedge mark or journal made by
 *      hand in .fstx/ is not seen while the hint says clean.
 *  W9. The header's salt is read again only when the hint's salt is not
 *      the one this handle last read there: a checkpoint writes the hint
 *      invalid before it writes a new header (W6), so a valid hint with
 *      the old salt means the header has not changed.
 * W10. Lazy transactions (FSTX_UT_LAZY) that make no name end at W3's
 *      append (one that makes names commits as a durable one): the hint's
 *      LAZY set to the record's end, no barrier, nothing
 *      applied; their commit point is the append itself (they are promised
 *      atomic, not durable).  A lazy transaction without compare ops, and
 *      without xattr ops that must find their xattr as they need (a
 *      removal, create or replace, W1; reads_tree(); test_wal
 *      lazy_xattr_reads), reads
 *      nothing, so it is appended behind open records without helping,
 *      unless one of them has name entries (its plan saw the tree without
 *      them; test_wal names_move_dir);
 *      every other transaction, a lazy one that reads the tree, a reader
 *      (LAZY above APPLIED makes it help), fstx_sync(), the close of a
 *      handle that appended lazy records, and the queue passing
 *      fx_lazy_max bytes flush them: help (W4).  At a transaction's start
 *      they stay queued.  Power loss keeps a prefix of the log's records
 *      (replay stops at the first invalid one, W2, W5), so what survives
 *      of the queue is whole transactions in commit order.
 * W11. The hint's kept word says that a record of a transaction that is
 *      not crash-only was appended since the last checkpoint (set by the
 *      append's hint write; without a hint of this boot it is assumed).
 *      A checkpoint because the log is full, while kept is 0, has no
 *      barrier: no fsync, no fdatasync of the new header.  Nothing in the
 *      log was promised across power loss, and W6's order holds in the
 *      page cache.  It lists the objects W6 would have fsynced in
 *      .fstx/wdebt (wal_debt.c; a list that would pass W_CHUNK bytes makes
 *      it a checkpoint with barriers instead) and sets the hint's loose
 *      word: changes it dropped from the log are not durable in place.
 *      While loose is set, the next durable transaction of the log fsyncs
 *      every object listed, then the log's barrier (under the lock,
 *      through the group commit, W3: fx_w_barrier(), which waits for a
 *      barrier under way and skips its own where one covered every
 *      record), which also makes the new header durable, and clears
 *      it; any other checkpoint (the undo way's, fstx_recover(),
 *      fstx_sync()) runs, with its barriers and the list's, even on an
 *      empty log.  So a durable commit still makes every earlier
 *      crash-only record of the log durable (fstx(7); crash-only
 *      transactions of the undo way: trans.c fx_crash_only_pay()), and
 *      nothing syncs the whole filesystem.  test_wal loose_checkpoint,
 *      test_powerloss power_loss_debt.
 * W12. A crash-only writer that finds the hint as it last wrote it (no
 *      other lock holder came between) and whose record is the first
 *      open one may leave the hint saying busy over its record after
 *      applying it: it remembers (salt, APPLIED, END) of that hint, and
 *      at its next lock, finding the hint still so, takes the record as
 *      applied (the next hint it writes says so).  Any other lock holder
 *      finds busy and helps (W4): applying the record again changes
 *      nothing, as nothing after it changed the same bytes (it is the
 *      last), and a help pass over a log of crash-only records only
 *      (kept 0, W11) needs no fdatasync first.  So two crash-only
 *      transactions in a row on one handle cost one hint write, not two.
 *      The handle's close writes the hint it owes (fx_wal_settle()).
 * W13. Large overwrites are staged, not logged.  In a durable
 *      transaction on a filesystem with reflink, a pwrite of
 *      fx_wal_stage_min bytes or more into an existing file
 *      (fx_wal_stages()) writes its data at its own offset into a new file
 *      .fstx/wnew/SALT-OFFSET-cOP, and the record holds a clone entry
 *      naming that file and its inode instead of the data (so such bytes
 *      do not count against fx_wal_large, W1).  Before the record is
 *      appended, each staged file is fdatasync()ed and then .fstx/wnew/
 *      fsynced: the record can never be durable without the data and
 *      the name it points at (wal_stage.c fx_w_stage_writes()).  Applying
 *      the entry, in place or in replay (W5), clones the range into the
 *      file (FICLONERANGE: the data is written once), else copies it;
 *      again and again gives the same bytes.  The staged files live until
 *      the checkpoint's emptying of .fstx/wnew/ (W6), which the
 *      transaction runs at once after applying.  Crash-only and lazy
 *      transactions log their data as before (nothing would sync the
 *      staged file before a later barrier made the record durable).
 *      test_wal large_staged, and kill_every_call / errors_every_call
 *      with every pwrite staged.
 * W14. O_APPEND writes are logged at fixed offsets: under the lock, with
 *      every record on the file applied (W4), the writer takes the file's
 *      size and follows what the transaction's ops before each append do
 *      to it (O_TRUNC, truncate, pwrites past the end); each append's
 *      entry is a pwrite at the end found so (append_offsets()).  Replay
 *      writes the same bytes at the same offset however often it runs,
 *      where an append would add them again.  A lazy transaction, which
 *      may queue behind unapplied records (W10), first applies them when
 *      one of them changes a file it appends to (append_inodes()), so the
 *      sizes it finds are the log's; so two lazy appends to one file in a
 *      row cost the second one barrier (the help's).  test_wal
 *      append_fixed, lazy_appends.
 * W15. Renames of files and symlinks of the tree are name entries (kind
 *      10: the object's inode, its new path, and the path it leaves in the
 *      name field), after the removals and new directories of their record
 *      and before its new files (a rename over an old file, into a new
 *      directory, or out of a name a new file then takes).  Each object is
 *      moved at most once by a transaction and not also removed (but
 *      W24's rename then removal, which makes no entry), so no cycles; a
 *      rename lands on the name another rename leaves only after it in
 *      step order (a chain, as a rotation: rename b old, rename a b),
 *      since the record applies its renames in step order; a directory
 *      only as W20 says; no rmdir of the directory it leaves (W24;
 *      wal_stage.c fx_w_move_declined(), chained()).  test_wal
 *      names_move_chain.
 *      A transaction that renames an object which any record of the log
 *      names (applied or not) checkpoints first (moves_first()), so no
 *      record before its own knows the object by the name it leaves, and
 *      those after it know it by its new one: replay finds it at its new
 *      name (done; a second name at the old one, a rename half persisted
 *      by btrfs, is removed), at its old name (renamed), or, when a later
 *      record removes it, at neither (done); anything else is -ESTALE.
 *      The checkpoint fsyncs both directories (W6, W_OBJ_SRC).  Until the
 *      record is applied, the writer's later ops find the file at its old
 *      name (fx_w_now_at()); its entries name it by the new one.
 *      test_wal names_move, names_move_logged.
 * W16. Hard links to files and symlinks of the tree are name entries too
 *      (kind 11: the inode, the new name, the first name in the name
 *      field), in step order with the renames and under the same limits
 *      (fx_w_move_declined(); moves_first() checkpoints first when a
 *      record names the inode).  The writer and replay alike: the new
 *      name holding the inode is done, else the first name holding it is
 *      linked there, else -ESTALE (no later record removes a name of the
 *      object: W17 checkpoints first).  The checkpoint fsyncs the new
 *      name's directory.  test_wal names_link.
 *      A new file's names are the names its moves leave it at when the
 *      transaction ends (wal_stage.c struct nix: a link adds one, a
 *      rename moves one, an unlink drops one): its W_NEWF entry takes the
 *      first, and each other is a kind 11 entry after the new files, from
 *      that first name, with the staged file's inode.  Replay makes the
 *      file first (W5), then the link; a link name still on the inode of
 *      a file that replay had to make again (its staged name and first
 *      name lost) is linked again to the file made.  A new file left with
 *      no name: W27.  test_wal new_file_linked, corpus tx 19.
 * W17. Removals of a name of a file or symlink that has other names are
 *      removals like any other (W1, W2: the name goes to .fstx/wnew/ after
 *      the barrier, replay moves it there when it still holds the inode),
 *      but the object lives on, so "a later record removes it", which lets
 *      replay skip an earlier record's entries on an inode (W5,
 *      fx_w_gone_later()) or finish a rename (W15), no longer means it is
 *      gone: a transaction that removes such a name checkpoints first when
 *      a record of the log names the object (moves_first()), as a rename
 *      does, so no record before its own names it.  Such an object may
 *      be written, truncated and have its xattrs changed in the same
 *      transaction by a name it keeps (one it had when the transaction
 *      began that no removal of the transaction takes, with nothing of
 *      the tree renamed or exchanged, W20, W24): those entries name it
 *      there (wal_stage.c writes_kept_name()).  test_wal
 *      names_unlink_linked, names_kept_name_moved.
 *
 * W18. A new directory may be renamed by the transaction that makes it
 *      (built under one name, published under another): its record
 *      knows it only at its last name, and every new object in it, or
 *      object of the tree moved into it, at the path under that name
 *      (wal_stage.c rebased()), so replay and the writer make the
 *      directory once, where the transaction leaves it, as for any new
 *      directory (W2).  A later move of an object made in it, by the
 *      directory's new name, is matched to the name the object had
 *      there (name_before()).  New directories may thus end nested
 *      other than in the order they were made (mkdir u, mkdir v, rename
 *      u v/u): their entries go parents first (parents_first()), as the
 *      writer and replay make them in entry order.  test_wal
 *      names_dir_renamed.
 *
 * W19. Clone ranges are staged like W13's large writes, on every
 *      filesystem: under the lock the source range (as much of it as the
 *      source holds: the op's result) is cloned, or copied where reflink
 *      is missing, into a staged file at the destination's offset, made
 *      durable before the record, whose clone entry names it; the range
 *      is then cloned (or copied) into place as W13's.  The source is a
 *      file the transaction opens read-only and whose data no op of it
 *      changes, so the staged copy is what the op would read (trans.c
 *      clone_ok()); durable transactions only (as W13), an explicit
 *      length, and none with an O_APPEND open (W14 follows sizes through
 *      pwrites and truncates, not clones; a clone into an O_APPEND file
 *      fails).  test_wal clone_log.
 *
 * W20. A directory of the tree may be renamed through the log (entry kind
 *      10 with a = S_IFDIR), alone: no other name entry and no other op
 *      of its transaction names a path at or under its old or new name
 *      but removals (W24), a rename that chains with it (W15: leaves
 *      its new name before it, or takes its old one after it, with no op
 *      at or under that shared name, where a path would name two
 *      objects, and neither moved into what the other then moves, whose
 *      replay would look for it where that move took it from), and ops
 *      on the data, size and xattrs of files of the
 *      tree under it (wal_stage.c dir_move_declined()), whose entries
 *      name them under the new name (fx_w_final_paths(); before the barrier they are
 *      opened under the old one, fx_w_now_at()), so the record knows every
 *      object by the path it has when the transaction ends, and replay,
 *      which moves the directory first, finds them there; and first in its
 *      log: the transaction checkpoints first whenever the log holds a
 *      record (moves_first()), so no record before its own knows a path
 *      under the name it leaves.  Records after it know the paths under
 *      the new name, and replay runs in order.  While it is open, every
 *      transaction helps first, as for any record with name entries (W4,
 *      conflicts_read()).  Replay is W15's: done at the new name, renamed
 *      from the old one.  The checkpoint fsyncs the directory, its new
 *      parent and its old one (W6, W_OBJ_SRC).  test_wal names_move_dir.
 *      Besides those, new files, symlinks and directories made after the
 *      rename at or under either name (a directory kept aside while a new
 *      one is built at its name; one renamed, then added to) and the ops
 *      that change only their data and xattrs: their entries follow the
 *      move's in the record (new directories made there go right after
 *      the renames, wal_stage.c names_late(); new files and symlinks
 *      come after them anyway), so replay finds the name free, or the
 *      directory at its new name, when it makes them (made_after(),
 *      makes_new()).  A new object's setgid group is that of the
 *      directory it was made in, looked up where that directory was
 *      then (plan.c fx_new_group(), for the undo way too).  Not a new
 *      object made before the rename, nor a rename or link of the tree
 *      into the new directory (the undo way).  test_wal
 *      names_dir_then_new, dir_then_new_kill; cli.bats "setgid directory".
 *
 * W21. An exchange (rename with RENAME_EXCHANGE, which the plan makes as
 *      three moves through .fstx/new/, fx_wal_swap_at()) of two files or
 *      symlinks of the tree, in one directory or in two, is one name
 *      entry (kind 12: the path, the inode there before, the other path
 *      in the name field, the other inode in a): one rename(2), which
 *      power loss keeps or loses whole; the checkpoint fsyncs both
 *      directories (W_OBJ_SRC).  No other name entry or op of the
 *      transaction names either object or either name (wal_stage.c
 *      swap_declined()), and a record of the log that names either
 *      object makes the transaction checkpoint first (moves_first(), as
 *      W15).  Two directories of the tree in one directory are exchanged
 *      the same way under W20's terms: alone (no other name entry or op
 *      at or under either name, dir_move_declined()) and first in the log
 *      (moves_first() checkpoints first whenever the log holds a record),
 *      so no record before its own knows a path under either name, and
 *      records after it know the paths the exchange leaves; their ".."
 *      does not change.  Replay: exchanged when the names hold the objects as
 *      before, done when each holds the object it gets or that object is
 *      gone (a later record removes it), else -ESTALE.  Exchanges of
 *      directories across directories (their ".." changes) or of a file
 *      with a directory take the undo way, unless the transaction removes
 *      one of the two (W24).  test_wal names_exchange, test_powerloss
 *      power_loss_wal.
 *
 * W22. Large new files are written whole before the record, not logged.
 *      When a durable transaction's data to log (W1) passes fx_wal_large,
 *      each new file it writes fx_wal_stage_min bytes or more into, that
 *      no op but its one open (O_CREAT), pwrites, truncates, xattr ops,
 *      renames and links touches (wal_stage.c fx_wal_logged()), gets every
 *      change of the transaction in its staged file (W2) before the record
 *      is appended, in op order; then such files (data, size, xattrs),
 *      the staged directories they were made in and .fstx/wnew/ are
 *      fsynced as one set (syncset.h; wal_apply.c fx_w_apply_whole()),
 *      and only then is the record written, so the record is never
 *      durable without them (as W13).  The record holds their name entries
 *      and nothing of their data, and nothing applies their changes again
 *      (not the writer, a helper or replay, W4, W5): the staged file holds
 *      its final content, and its name entry puts it in place.  A staged
 *      file lost with its name (W5) cannot be one of these.  Crash-only and
 *      lazy transactions log (or take the undo way) as before.  test_wal
 *      new_whole, and the kill and fault sweeps' staged third, whose
 *      limit of 3 logged bytes makes the fifth transaction's new b whole.
 * W23. Nothing a record applies after its barrier may fail for want of
 *      permission: no prediction covers that, and the record would roll
 *      forward for ever, every later transaction failing with it.  A
 *      caller other than root takes the undo way (which meets the
 *      kernel's error and rolls back) where a name the record adds or
 *      removes lies in a directory it may not write and search (by
 *      access(2) with its effective ids; one the transaction makes, by
 *      the mode it asks), or in a sticky directory; where a directory it
 *      moves, or removes into .fstx/wnew/, refuses it write; or where an
 *      xattr op changes an object it may not write (a new one, by its
 *      mode).  Objects it made with modes that refuse their owner are
 *      opened again for their data and their fsyncs by adding the
 *      owner's bits for the open (domain.c fx_open_owned()).
 *      wal_stage.c fx_w_perm_declined(); cli.bats "run without
 *      privilege".  An object or directory whose names or xattrs a record
 *      changes that is immutable or append-only (chattr +i, +a: EPERM to
 *      root too) sends any caller's transaction the undo way
 *      (names_locked(); cli.bats "an immutable or append-only object").
 * W24. A removal entry names its object by the path it had when the
 *      transaction began, since the record applies every removal before
 *      any other name change: the steps' moves before the removal are
 *      undone on its path (wal_stage.c first_path()), so an object
 *      removed under a directory the transaction renamed, or exchanged,
 *      is removed at its old path, and removals go deepest first.
 *      A rename of an object of the tree followed by the removal of the
 *      name it gave makes no entry of its own: the removal takes the
 *      object where it was (collapsed()).  An exchange (W21's three
 *      steps) followed by the removal of one of its objects, by the name
 *      the exchange gave it, is that removal and a rename of the other
 *      object (W15, W20: swap_collapsed()), in one directory or across
 *      two; where the other is new (fx_wal_swap_new_at()), it is that
 *      removal and the new object's entries at its last name.  So a
 *      directory put aside and removed with what it holds while another
 *      takes its place (rename d d.old, rename n d, unlink d.old/...,
 *      rmdir d.old, or rename n d exchange and n removed: a package
 *      manager's switch) commits here, one barrier, where it took the
 *      undo way's three.
 *      Limits (fx_w_move_declined(), removal_declined()): no rmdir of a
 *      directory that a link of the record takes an object from, nor
 *      one a rename takes an object from but as W25 says (the record
 *      would still find it there); no other entry but
 *      removals at or under the name a taken-over rename gave (the
 *      record knows no such name), a name in a directory that is where
 *      it was when the transaction began, so that W23 looks at it
 *      (immutable, append-only, the caller's access: the undo way meets
 *      the kernel's refusal there); no object both exchanged and removed
 *      but as an exchange taken over.  A directory's move (W20) may have
 *      removals beside it at or under its names (removes_only()): they
 *      run first, at the paths of the tree as it was.
 *      A staged new directory's entry names the staged directory's
 *      inode, so replay skips it, as any entry on an inode a later
 *      record removes (W5), and makes a lost one again under a remapped
 *      inode; so a transaction that removes a directory a record made
 *      staged, or renames then removes an object, does not checkpoint
 *      first (moves_first()): switches in a row cost one barrier each,
 *      where each checkpointed first (an fsync of everything the log
 *      named).  Replay and the checkpoint take a path that runs through
 *      a file or symlink now as gone (ENOTDIR, ELOOP as ENOENT: a later
 *      entry made one at the name of a directory removed).  test_wal
 *      names_tree_swap, names_gone_under_file, names_kept_name_moved,
 *      switch_kill; the sequence's last transaction, in the kill and
 *      fault sweeps; cli.bats, the renames into a directory that
 *      refuses them.
 * W25. An rmdir of a directory that renames of the record empty (they
 *      take an object of the tree out from under it: what a directory
 *      holds moved elsewhere, then the directory removed) is among the
 *      record's last entries, after every other name change, at the path
 *      the directory had when the transaction began (wal_stage.c
 *      names_late(); entries apply in record order, in place and in
 *      replay, so the renames have emptied it; nested ones deepest
 *      first, as W24 orders them).  Replay finds it done when the name
 *      is gone or holds another inode (W5).  Only where that path is
 *      still the directory's at the end: no entry but a removal makes a
 *      name at or under it, no exchange and no directory's move in the
 *      record, and not a removal that took over a rename
 *      (late_declined(); else the undo way).  test_wal names_moved_out,
 *      moved_out_kill.
 * W26. A new directory the record makes in place (W2: one that holds a
 *      new directory, or no new file or symlink) takes from the kernel
 *      the group of the directory at its last name, where mkdir(2) would
 *      have given it that of the directory it was made in (setgid, or
 *      the caller's).  A transaction that renames such a directory to
 *      another parent whose group it gives may differ takes the undo way
 *      (wal_stage.c group_moves(); a new parent gives the group it took,
 *      one of the tree its own where setgid).  cli.bats "setgid
 *      directory".
 * W27. A new file that the transaction leaves with no name (a rename
 *      takes its name, or an unlink removes it: replace of a file made
 *      earlier in the same transaction) has no entry, and neither have
 *      its ops: it is made unnamed in .fstx/wnew/ (O_TMPFILE,
 *      wal_stage.c fx_w_stage_tmp()), its ops run on it before the
 *      barrier (W3) with their results, and it goes when its descriptor
 *      closes; nothing after the barrier or in replay knows of it
 *      (fx_w_nowhere).  Where the filesystem refuses O_TMPFILE, the undo
 *      way.  test_wal new_file_nameless, corpus tx 12.
 *
 * The undo journal and this log are never both live: a transaction of the
 * undo way checkpoints the log first, and the log is only appended to
 * after the undo journal has been recovered.
 */
#define _GNU_SOURCE
#include "syncset.h"
#include "wal_int.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

uint64_t fx_wal_max = 4u << 20;
uint64_t fx_wal_large = 1u << 20;
uint64_t fx_wal_big = 1u << 30;
uint64_t fx_wal_keep = 128u << 20;
uint64_t fx_wal_stage_min = 512u << 10;

int fx_wal_stages(struct fstx_domain *d, uint64_t flags, uint64_t len, int newf)
{
	if (newf || len < fx_wal_stage_min || (flags & (FSTX_UT_NOSYNC | FSTX_UT_LAZY)))
		return 0;
	return fx_fs_probe(d) == 0 && d->fs.reflink;
}
uint64_t fx_lazy_max = 4u << 20;
uint64_t fx_wal_window = 256u << 10;

/* W3: a record this large starts its write-out before new files get data */
#define FX_W_OVERLAP (32u << 10)

/*
 * A new, empty log with a new salt (W6).  A checkpoint's header is made
 * durable at once: old records must not be replayed over later changes.
 * The first header of a log (none valid before: no old records) is made
 * durable by the first record's barrier, which covers the whole file.
 */
/*
 * W2: a log that a large record grew past fx_wal_keep is cut back to it
 * (its new header durable: nothing past it is of this salt).  Up to that
 * size its blocks stay allocated, so the next large record does not pay
 * for allocating them again.  A failure only leaves the file long.
 */
static void wal_shrink(struct fstx_domain *d)
{
	struct stat st;

	if (fx_wal_keep >= W_START && fx_os.fstat(d->wal, &st) == 0 &&
	    (uint64_t)st.st_size > fx_wal_keep &&
	    fx_os.ftruncate(d->wal, (off_t)fx_wal_keep) == 0)
		d->wal_size = fx_wal_keep;
}

static int wal_reset(struct fstx_domain *d, int loose)
{
	unsigned char b[W_START];
	uint64_t old = d->wal_salt, salt;
	int r;

	if ((r = fx_w_head_new(old, b, &salt)) < 0)
		return r;
	/* the hint goes first: a loader trusts its salt without the header */
	if ((r = fx_w_hint_drop(d)) < 0 ||
	    (r = fx_w_write_all(d->wal, b, sizeof(b), 0)) < 0)
		return r;
	if (old && !loose && (r = fx_os.fdatasync(d->wal)) < 0) {
		/* W3: the new header's page may be clean and not on the disk,
		 * and the next lock holder reads it from the page cache */
		(void)fx_w_group_fail(d, salt, 0);
		d->latched = r;
		return r;
	}
	if (old && !loose)
		wal_shrink(d);
	d->wal_salt = salt;
	fx_w_remap_clear(d); /* the records it served are gone */
	d->wal_end = d->wal_applied = W_START;
	d->wal_lazy = 0; /* every lazy record was applied first (W6) */
	d->wal_kept = 0;
	d->wal_loose = loose;
	return fx_w_hint_write(d);
}

static int recover_loaded(struct fstx_domain *d, int fresh, int all);
static int checkpoint(struct fstx_domain *d, int loose_ok);

/*
 * Replay every valid record from the start (W5), when no hint of this
 * boot says what was applied.  1 replayed something, 0 nothing, -errno.
 */
int fx_wal_recover(struct fstx_domain *d)
{
	return fx_wal_recover_mode(d, 1);
}

int fx_wal_recover_mode(struct fstx_domain *d, int lazy_too)
{
	int fresh, r = fx_w_load(d, &fresh);

	if (r < 0 || !d->wal_salt)
		return r < 0 ? r : 0;
	return recover_loaded(d, fresh, lazy_too);
}

/*
 * W8: at the start of a transaction, a hint of this boot that says clean
 * stands for the checks of the wedge mark, the journal and the progress
 * marks.  1 clean (and the log recovered as fx_wal_recover() does), 0 the
 * caller must check (and then fx_wal_recover()), -errno.
 */
int fx_wal_enter(struct fstx_domain *d)
{
	int fresh, r = fx_w_load(d, &fresh);

	if (r < 0 || !d->wal_salt || !fresh || !d->wal_clean)
		return r < 0 ? r : 0;
	r = recover_loaded(d, fresh, 0);
	return r < 0 ? r : 1;
}

/* W12, at close: the hint says the handle's last record is applied. */
int fx_wal_settle(struct fstx_domain *d)
{
	int fresh, r = fx_w_load(d, &fresh);

	if (r < 0 || !fresh || !d->wal_mine)
		return r < 0 ? r : 0;
	return fx_w_hint_write(d);
}

/* The checks of W8 found the domain clean: say so in the hint. */
int fx_wal_set_clean(struct fstx_domain *d)
{
	if (!d->wal_salt || d->wal_clean)
		return 0;
	d->wal_clean = 1;
	return fx_w_hint_write(d);
}

/* Before the journal, a progress mark or the wedge mark is made (W8). */
int fx_wal_set_dirty(struct fstx_domain *d)
{
	if (!d->wal_clean)
		return 0;
	d->wal_clean = 0;
	return d->wal_salt ? fx_w_hint_write(d) : 0;
}

static int recover_loaded(struct fstx_domain *d, int fresh, int all)
{
	uint64_t off, size;
	unsigned char *buf = NULL;
	struct stat st;
	struct wrec h;
	long n = 0;
	int r, v;

	if (fresh) /* this boot: only an applier cut short needs work */
		return d->wal_busy || (all && d->wal_lazy > d->wal_applied) ?
		       fx_w_help(d) : 0;
	/* a writer on another mount of this filesystem (a bind mount) may
	 * be at its barrier now: nothing is replayed in place before its
	 * record is durable (W3) */
	if ((r = fx_w_log_sync(d)) < 0 || (r = fx_w_group_forget(d)) < 0)
		return r;
	if ((r = fx_os.fstat(d->wal, &st)) < 0)
		return r;
	size = (uint64_t)st.st_size;
	buf = fx_malloc(W_CHUNK);
	if (!buf)
		return -ENOMEM;
	/* the valid records' end first: removals they make (W5) are
	 * known before any record is replayed */
	off = W_START;
	while ((v = fx_w_rec_check(d, off, size, &h, buf)) == 1) {
		off = rec_next(off, &h);
		if (off > size)
			off = size;
	}
	if ((r = v) < 0 || (r = fx_w_gone_scan(d, W_START, off, 0)) < 0)
		goto out;
	for (uint64_t end = off, at = off = W_START; at < end; at = off) {
		/* checked above, under the lock: its header is enough */
		if ((r = fx_w_read_all(d->wal, &h, sizeof(h), at)) < 0) {
			r = r == -ENODATA ? -EUCLEAN : r;
			goto out;
		}
		if ((r = fx_w_rec_replay(d, at, &h, buf)) < 0)
			goto out;
		off = rec_next(at, &h);
		if (off > size)
			off = size;
		n++;
	}
	d->wal_end = d->wal_applied = off;
	if ((r = fx_w_hint_write(d)) < 0)
		goto out;
	/* new files made again under other inode numbers: durable now,
	 * while this handle knows them (fx_w_name_apply()) */
	if (d->wal_nremap && (r = checkpoint(d, 0)) < 0)
		goto out;
	r = n > 0;
out:
	d->wal_ngone = 0;
	free(buf);
	return r;
}

int fx_wal_pending(struct fstx_domain *d)
{
	struct stat st;
	struct wrec h;
	unsigned char *buf;
	int r, fresh;

	if ((r = fx_w_load(d, &fresh)) < 0 || !d->wal_salt)
		return r < 0 ? r : 0;
	if (fresh) /* an applier cut short, or lazy records (W10) */
		return d->wal_busy || d->wal_lazy > d->wal_applied;
	if ((r = fx_os.fstat(d->wal, &st)) < 0)
		return r;
	if (!(buf = fx_malloc(W_CHUNK)))
		return -ENOMEM;
	r = fx_w_rec_check(d, W_START, (uint64_t)st.st_size, &h, buf);
	free(buf);
	return r;
}

int fx_wal_owed(struct fstx_domain *d)
{
	return d->wal_owed;
}

uint64_t fx_wal_bytes(struct fstx_domain *d)
{
	return d->wal_end > W_START ? d->wal_end - W_START : 0;
}

int fx_wal_peek(struct fstx_domain *d, uint64_t *bytes)
{
	unsigned char *buf;
	struct stat st;
	struct wrec h;
	uint64_t off = W_START;
	int r, fresh;

	*bytes = 0;
	if ((r = fx_w_load(d, &fresh)) < 0 || !d->wal_salt)
		return r < 0 ? r : 0;
	if (fresh) {
		*bytes = fx_wal_bytes(d);
		return 0;
	}
	if ((r = fx_os.fstat(d->wal, &st)) < 0)
		return r;
	if (!(buf = fx_malloc(W_CHUNK)))
		return -ENOMEM;
	while ((r = fx_w_rec_check(d, off, (uint64_t)st.st_size, &h, buf)) == 1)
		off = rec_next(off, &h);
	free(buf);
	*bytes = off - W_START;
	return r < 0 ? r : 0;
}

/* The directory holding path, and (W_OBJ_FILE) the directory at path. */
static int sync_dir(struct fstx_domain *d, const char *path, unsigned obj,
		    struct fx_syncset *ss)
{
	const char *n;
	int dfd = fx_parent(d, path, &n), fd;

	if (dfd < 0)
		return w_gone(dfd) ? 0 : dfd;
	fx_ss_dir(ss, dfd);
	fd = !(obj & W_OBJ_FILE) ? -ENOENT :
	     fx_openat_owned(dfd, n, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, FX_RESOLVE);
	fx_os.close(dfd);
	if (w_gone(fd))
		return 0;
	if (fd < 0)
		return fd;
	fx_ss_take(ss, fd);
	return 0;
}

/*
 * What w_objects() says entry e names.  A new file's data, size and
 * xattrs are entries of their own, which fsync it; the fsync of its
 * directory makes its name and its (empty) inode durable.
 */
static int sync_entry(struct fstx_domain *d, const struct went *e,
		      const char *path, const char *name, uint64_t data,
		      struct wvisit *v)
{
	unsigned obj = w_objects(e->kind, e->nlen, e->a);
	struct stat st;
	int fd, r;

	(void)data;
	if (obj & W_OBJ_WNEW)
		*(int *)v->arg = 1;
	if ((obj & W_OBJ_SRC) && (r = sync_dir(d, name, 0, v->ss)) < 0)
		return r;
	if (obj & W_OBJ_PARENT)
		return sync_dir(d, path, obj, v->ss);
	if (fx_ss_has(v->ss, fx_w_ino(d, e->ino)))
		return 0;
	/* read-only is enough to fsync, and works on a file made read-only
	 * since its record (fx_w_entry_fd() wants to write) */
	fd = fx_open_owned(d, path, O_RDONLY | O_NONBLOCK);
	if (w_gone(fd))
		return 0; /* removed since: nothing of the log's there */
	if (fd < 0)
		return fd;
	if ((r = fx_os.fstat(fd, &st)) < 0 || (uint64_t)st.st_ino != fx_w_ino(d, e->ino)) {
		fx_os.close(fd);
		return r < 0 ? r : 0; /* another file there now: not the log's */
	}
	fx_ss_take(v->ss, fd);
	return 0;
}

/*
 * W6: make durable in place every file a record of the log names, one
 * fsync each (syncset.h), never the whole filesystem; and .fstx/wnew/
 * when a record moved a name to or from it (a rename between two
 * directories is durable once both are).
 */
static int wal_sync_named(struct fstx_domain *d)
{
	struct fx_syncset ss;
	int staged = 0;
	struct wvisit v = { .fn = sync_entry, .ss = &ss, .arg = &staged };
	struct wrec h;
	int r = 0;

	fx_ss_init(&ss);
	for (uint64_t off = W_START; off < d->wal_end && r == 0;
	     off = rec_next(off, &h)) {
		if ((r = fx_w_rec_head(d, off, &h)) < 0)
			break;
		r = fx_w_rec_walk(d, off, &h, &v);
	}
	if (r == 0 && staged) {
		int fd = fx_open(d, W_WNEW, O_RDONLY | O_DIRECTORY, 0);

		fx_ss_take(&ss, fd == -ENOENT ? -1 : fd);
	}
	if (r < 0) {
		fx_ss_drop(&ss);
		return r == -ENODATA ? -EUCLEAN : r;
	}
	return fx_ss_flush(&ss);
}

/*
 * W6, W11: loose_ok for a checkpoint because the log is full; it has no
 * barrier when every record since the last one is crash-only.
 */
static int checkpoint(struct fstx_domain *d, int loose_ok)
{
	int r, loose;

	if (d->wal < 0 || (d->wal_end <= W_START && !d->wal_loose))
		return 0;
	int helped = fx_w_help(d);

	if (helped < 0)
		return helped;
	loose = loose_ok && !d->wal_kept;
	if (loose && fx_w_debt_note(d) != 0)
		loose = 0; /* too much to list, or no list: the barriers */
	if (!loose && ((r = d->wal_loose ? fx_w_debt_pay(d) : 0) < 0 || /* W11 */
		       (r = wal_sync_named(d)) < 0)) {
		d->latched = r;
		return r;
	}
	r = wal_reset(d, loose);
	if (r < 0)
		return r;
	/* the staged files of its records: every one is at its new name,
	 * durable (above), and no record names them now; left over, they
	 * are garbage the next checkpoint removes */
	fx_clean_wnew(d);
	return 1 + helped;
}

int fx_wal_checkpoint(struct fstx_domain *d)
{
	return checkpoint(d, 0);
}

/* ---- commit ------------------------------------------------------------ */

/*
 * W11: a durable commit after crash-only transactions whose changes no
 * record holds any more: fsync their objects (this handle's of the undo
 * way, trans.c; those a loose checkpoint listed), then the log, which
 * also makes a loose checkpoint's header durable.  Under the lock; the
 * log's barrier through the group commit (W3: fx_w_barrier()).
 */
static int pay_debts(struct fstx_domain *d)
{
	int r = d->nosync_undo ? fx_crash_only_pay(d) : 0;

	if (r == 0 && d->wal_loose)
		r = fx_w_debt_pay(d);
	return r < 0 ? r : fx_w_barrier(d);
}

/*
 * The handle keeps the files of its recent log transactions open (FX_FDC
 * of them), so that a transaction on the same files opens nothing.  An fd
 * is reused only for the inode that the planner's lstat found at the path
 * just now: same device (the domain's), same inode number, and the same
 * open flags.  No fstat is needed: while the fd is open its inode lives
 * (even if unlinked), and no two live inodes of a device share a number,
 * so the path names the fd's inode.  A rename or unlink by anyone since
 * makes the entry miss.  Entries are added after the transaction, never
 * while its fds are in use.
 */
static int fdc_get(struct fstx_domain *d, uint64_t ino, int flags)
{
	for (size_t k = 0; k < FX_FDC; k++) {
		struct fx_fdc *c = &d->fdc[k];

		if (c->fd >= 0 && c->ino == ino && c->flags == flags)
			return c->fd;
	}
	return -1;
}

/* Keep fd (of inode ino, opened with flags) in the cache, or close it. */
static void fdc_put(struct fstx_domain *d, uint64_t ino, int flags, int fd)
{
	struct fx_fdc *c;

	for (size_t k = 0; k < FX_FDC; k++)
		if (d->fdc[k].fd >= 0 && d->fdc[k].ino == ino &&
		    d->fdc[k].flags == flags) {
			fx_os.close(fd); /* opened twice in one transaction */
			return;
		}
	c = &d->fdc[d->fdc_next++ % FX_FDC];
	if (c->fd >= 0)
		fx_os.close(c->fd);
	*c = (struct fx_fdc){ .ino = ino, .fd = fd, .flags = flags };
}

/* The fds of one log transaction: own[i] 1 opened here, 2 from the cache. */
struct tfds {
	int *fd;
	int *flags;
	unsigned char *own;
	char path[PATH_MAX]; /* fx_w_now_at()'s */
};

/* The op that creates new object obj (< 0), or -1. */
static long creator(const struct plan *P, size_t i, int64_t obj)
{
	for (size_t j = 0; j < i; j++)
		if (P->pops[j].create && P->pops[j].obj == obj)
			return (long)j;
	return -1;
}

/*
 * Open the files the ops change (before the commit point), and stage the
 * new ones.  tgt[i] is the op whose fd op i uses: a pwrite its open's, a
 * truncate or setxattr of the file the last writable open opened, or of a
 * new file, that one's, else its own.
 */
static int open_targets(struct fstx_domain *d, const struct plan *P,
			struct tfds *F, uint64_t *ino, int *slot_op, int *tgt,
			struct wname *nm, size_t nnm)
{
	long last = -1; /* the last writable open */

	for (size_t i = 0; i < P->nops; i++) {
		const struct btrfs_ioctl_usertrans_op *op = &P->ops[i];
		const struct pop *po = &P->pops[i];
		struct wname *w;
		int flags, fd, r;
		struct stat st;
		long j;

		tgt[i] = (int)i;
		if (fx_pop_dead(P, i))
			continue; /* predicted to fail: nothing to open */
		int pathop = op->op == BTRFS_IOC_UT_OP_TRUNCATE ||
			     op->op == BTRFS_IOC_UT_OP_SETXATTR ||
			     op->op == BTRFS_IOC_UT_OP_REMOVEXATTR;

		if (pathop && last >= 0 && !strcmp(P->pops[last].cpath, po->cpath)) {
			tgt[i] = (int)last;
			ino[i] = ino[last];
			continue;
		}
		if (pathop && po->obj < 0) { /* a new file, opened by its staging */
			if ((j = creator(P, i, po->obj)) < 0)
				return -ESTALE;
			tgt[i] = (int)j;
			ino[i] = ino[j];
			continue;
		}
		switch (op->op) {
		case BTRFS_IOC_UT_OP_PWRITE: /* slots are reused: map it now */
		case BTRFS_IOC_UT_OP_CLONERANGE:
			tgt[i] = slot_op[op->args[0]];
			continue;
		case BTRFS_IOC_UT_OP_OPEN:
			slot_op[op->args[3]] = (int)i;
			if (po->create) {
				uint64_t sino;

				/* W27: one left with no name, unnamed */
				w = fx_w_name_of_op(nm, nnm, i);
				if ((fd = w ? fx_w_stage_file(d, nm, w) : fx_w_stage_tmp(d, &sino)) < 0)
					return fd;
				F->fd[i] = fd;
				F->flags[i] = O_WRONLY;
				F->own[i] = 1;
				ino[i] = w ? w->ino : sino;
				if ((op->args[1] & O_ACCMODE) != O_RDONLY)
					last = (long)i;
				continue;
			}
			if ((op->args[1] & O_ACCMODE) == O_RDONLY) {
				if (!fx_w_clone_source(P, i))
					continue; /* changes nothing */
				flags = O_RDONLY; /* W19: a clone's source */
				break;
			}
			flags = O_WRONLY;
			last = (long)i;
			break;
		case BTRFS_IOC_UT_OP_TRUNCATE:
			flags = O_WRONLY;
			break;
		case BTRFS_IOC_UT_OP_SETXATTR:
		case BTRFS_IOC_UT_OP_REMOVEXATTR:
			flags = O_RDONLY;
			break;
		default:
			continue;
		}
		if (po->check_ino && d->fs.ino_unique && d->fs.dev && po->dev == d->fs.dev &&
		    (fd = fdc_get(d, po->ino, flags)) >= 0) {
			F->fd[i] = fd;
			F->own[i] = 2;
			ino[i] = po->ino;
			continue;
		}
		fd = fx_open(d, fx_w_now_at(nm, nnm, po->cpath, po->step0, F->path),
			     flags | O_NONBLOCK, 0);
		if (fd < 0)
			return fd;
		F->fd[i] = fd;
		F->flags[i] = flags;
		F->own[i] = 1;
		if ((r = fx_os.fstat(fd, &st)) < 0)
			return r;
		if (!S_ISREG(st.st_mode) || (po->check_ino && po->ino != (uint64_t)st.st_ino))
			return -ESTALE;
		ino[i] = (uint64_t)st.st_ino;
		if ((uint64_t)st.st_dev != d->fs.dev)
			F->flags[i] = -1; /* another device: not for the cache */
	}
	return 0;
}

/* After the transaction: keep what it opened, or close it. */
static void close_targets(struct fstx_domain *d, struct tfds *F,
			  const uint64_t *ino, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (F->own[i] != 1)
			continue;
		if (F->flags[i] >= 0 && d->fs.ino_unique && d->fs.dev && ino[i])
			fdc_put(d, ino[i], F->flags[i], F->fd[i]);
		else
			fx_os.close(F->fd[i]);
	}
}

/* Has the object a removal (or rename) step k takes a name of other names
 * (W17)?  Looked for at the path it had when the transaction began (W24;
 * moved: the steps move names on before it).  One not found as planned
 * counts as one that has. */
static int other_names(struct fstx_domain *d, const struct plan *P, size_t k, int moved)
{
	const struct fx_step *s = &P->steps[k];
	char buf[PATH_MAX];
	const char *p = moved ? fx_w_first_path(P, k, buf) : s->src;
	struct stat st;

	return !p || fx_lstat(d, p, &st) < 0 || (uint64_t)st.st_ino != s->ino ||
	       (!S_ISDIR(st.st_mode) && st.st_nlink > 1);
}

/* W24: does a step after k remove the object step k renames (the rename
 * then makes no entry of its own, wal_stage.c collapsed())? */
static int removed_later(const struct plan *P, size_t k)
{
	for (size_t j = k + 1; j < P->nsteps; j++)
		if (P->steps[j].kind == FX_ST_MOVE && P->steps[j].ino == P->steps[k].ino &&
		    !P->steps[j].newid && fx_under(P->steps[j].dst, FX_TRASH))
			return 1;
	return 0;
}

/* Does step s rename a directory (W20)? */
static int moves_dir(struct fstx_domain *d, const struct fx_step *s)
{
	struct stat st;

	return fx_lstat(d, s->src, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The inodes a transaction renames, or removes a name of, and whether it
 * removes a directory (moves_first()). */
struct wids {
	uint64_t id[8];
	size_t n;
	int rmdir;
};

static int names_id(void *arg, uint64_t off, const struct went *e)
{
	const struct wids *w = arg;

	(void)off;
	if (w->rmdir && e->kind == W_MKDIR && !e->ino)
		return 1; /* made in place: replay knows it by its name only */
	for (size_t j = 0; j < w->n; j++)
		if (e->ino == w->id[j] || (e->kind == W_SWAP && e->a == w->id[j]))
			return 1;
	return 0;
}

/*
 * W15, W17: a transaction that renames an object of the tree, or removes a
 * name of one that has other names, which a record of the log names (any
 * record, applied or not) checkpoints first, so that no record before its
 * own knows the object by the name it leaves or takes it for gone: replay
 * then finds every object where its record says.  One that renames a
 * directory checkpoints first whatever the log holds (W20: no record
 * before its own knows a path under the name it leaves), and one that
 * removes a directory when a record of the log makes one in place (W2:
 * replay knows such a directory by its name only, and would make it
 * again; a staged one's entry names its inode, W24).  A rename of an
 * object that the transaction then removes is a removal (W24: no entry
 * of its own, so no record after knows the name it gives).  0 or -errno.
 */
static int moves_first(struct fstx_domain *d, const struct plan *P)
{
	struct wids w = { .n = 0 };
	int r = 0, moved = 0, was;

	if (d->wal_end <= W_START)
		return 0; /* an empty log names nothing */
	for (size_t k = 0; k < P->nsteps && r == 0; k++) {
		const struct fx_step *s = &P->steps[k];

		/* does a step before the next move a name on? (W24) */
		was = moved;
		moved |= fx_w_moves_name(s);
		if (s->kind != FX_ST_MOVE || s->newid || !s->ino)
			continue;
		if (fx_under(s->dst, FX_TRASH) && P->ops[s->op].op == BTRFS_IOC_UT_OP_RMDIR)
			w.rmdir = 1; /* a record's new directory there? (W2) */
		if ((fx_under(s->dst, FX_TRASH) || removed_later(P, k)) &&
		    !other_names(d, P, k, was))
			continue; /* a removal of its object's last name, or a
				   * rename before one (W24: no entry of its own) */
		if (!fx_under(s->dst, FX_TRASH) && moves_dir(d, s))
			r = 1; /* W20: the first record of its log */
		if (w.n == sizeof(w.id) / sizeof(w.id[0]))
			r = 1; /* many: checkpoint without looking */
		else
			w.id[w.n++] = s->ino;
	}
	if (!w.n && !w.rmdir)
		return 0;
	if (r == 0)
		r = fx_w_each_entry(d, W_START, d->wal_end, 0, names_id, &w);
	if (r > 0)
		r = checkpoint(d, 0);
	return r < 0 ? r : 0;
}

/*
 * W14: the offsets of O_APPEND pwrites, from the sizes of their files now
 * (under the lock, every record on them applied: W4) and what the ops
 * before them do to the sizes, in a copy of the ops (*ops2, NULL when
 * there are none).  0, 1 declined (too many ops to follow, or past
 * FX_WAL_MAX_OFF), -errno.
 */
#define W_APPEND_OPS 4096 /* ops of a transaction followed pairwise */

/* The inode whose size op i sets, or 0. */
static uint64_t size_ino(const struct plan *P, size_t i, const int *tgt,
			 const uint64_t *ino)
{
	if (fx_pop_dead(P, i))
		return 0;
	switch (P->ops[i].op) {
	case BTRFS_IOC_UT_OP_OPEN:
		return (P->ops[i].args[1] & O_ACCMODE) == O_RDONLY ? 0 : ino[i];
	case BTRFS_IOC_UT_OP_PWRITE:
		return ino[tgt[i]];
	case BTRFS_IOC_UT_OP_TRUNCATE:
		return ino[i];
	default:
		return 0;
	}
}

static int append_offsets(const struct plan *P, const int *fds, const int *tgt,
			  const uint64_t *ino, struct btrfs_ioctl_usertrans_op **ops2)
{
	struct btrfs_ioctl_usertrans_op *o;
	uint64_t *size, *key;
	size_t i, j, n = 0;
	struct stat st;
	int r = 0;

	*ops2 = NULL;
	for (i = 0; i < P->nops; i++)
		n += P->ops[i].op == BTRFS_IOC_UT_OP_PWRITE && P->pops[i].append &&
		     !fx_pop_dead(P, i);
	if (!n)
		return 0;
	if (P->nops > W_APPEND_OPS)
		return 1;
	o = fx_malloc(P->nops * sizeof(*o));
	size = fx_calloc(P->nops, sizeof(*size));
	key = fx_calloc(P->nops, sizeof(*key)); /* 1 + the first op on it */
	if (!o || !size || !key) {
		r = -ENOMEM;
		goto out;
	}
	memcpy(o, P->ops, P->nops * sizeof(*o));
	for (i = 0; i < P->nops && r == 0; i++) {
		uint64_t x = size_ino(P, i, tgt, ino), len = (uint64_t)o[i].args[2], *sz;

		if (!x)
			continue;
		for (j = 0; size_ino(P, j, tgt, ino) != x; j++)
			;
		sz = &size[j];
		if (!key[j]++) { /* its size before the transaction */
			int fd = o[i].op == BTRFS_IOC_UT_OP_PWRITE ? fds[tgt[i]] : fds[i];

			if ((r = fx_os.fstat(fd, &st)) < 0)
				break;
			*sz = (uint64_t)st.st_size;
		}
		switch (o[i].op) {
		case BTRFS_IOC_UT_OP_OPEN:
			if (o[i].args[1] & O_TRUNC)
				*sz = 0;
			break;
		case BTRFS_IOC_UT_OP_TRUNCATE:
			*sz = (uint64_t)o[i].args[1];
			break;
		default: /* a pwrite */
			if (P->pops[i].append) {
				if (*sz > FX_WAL_MAX_OFF - len) {
					r = 1;
					break;
				}
				o[i].args[3] = (__s64)*sz;
			}
			if (len && *sz < (uint64_t)o[i].args[3] + len)
				*sz = (uint64_t)o[i].args[3] + len;
		}
	}
out:
	free(size);
	free(key);
	if (r == 0)
		*ops2 = o;
	else
		free(o);
	return r;
}

/* Does entry e change an inode of set? */
static int ent_in(const struct went *e, const uint64_t *set, size_t n)
{
	for (size_t j = 0; j < n; j++)
		if (set[j] && set[j] == e->ino)
			return 1;
	return 0;
}

/* Does an open record change an inode of set (W4)?  Reading each record's
 * header, state word and entry headers. */
static int conflicts_read(struct fstx_domain *d, const uint64_t *set, size_t n)
{
	struct wrec h;
	struct went e;
	int r;

	for (uint64_t off = d->wal_applied; off < d->wal_end; off = rec_next(off, &h)) {
		uint64_t p = off + sizeof(h), end;

		if ((r = fx_w_rec_head(d, off, &h)) < 0)
			return r;
		if (!WS_OPEN(h.state))
			continue;
		end = p + h.len;
		for (uint32_t k = 0; k < h.nent; k++) {
			if (end - p < sizeof(e))
				return -EUCLEAN;
			if ((r = fx_w_read_all(d->wal, &e, sizeof(e), p)) < 0)
				return r == -ENODATA ? -EUCLEAN : r; /* EIO is not damage */
			if (W_IS_NAME(e.kind) || ent_in(&e, set, n))
				return 1;
			if ((p = fx_w_ent_next(p, end, &e)) > end)
				return -EUCLEAN;
		}
	}
	return 0;
}

/*
 * The same from memory: the open records lie end to end in [APPLIED, END),
 * and their state words in one range of walsync, so two reads fetch them
 * all (with several writers at their barriers, reading record by record
 * cost four reads per record under the lock).  Windows larger than
 * fx_wal_window are read record by record.
 */
static int conflicts_mem(struct fstx_domain *d, const uint64_t *set, size_t n)
{
	uint64_t a = d->wal_applied, len = d->wal_end - a;
	uint64_t slen = fx_w_states_len(a, d->wal_end);
	unsigned char *b, *st;
	int r;

	if (d->win_cap < len + slen) {
		if (!(b = fx_realloc(d->win, len + slen)))
			return -ENOMEM;
		d->win = b;
		d->win_cap = len + slen;
	}
	b = d->win;
	st = b + len;
	if ((r = fx_w_read_all(d->wal, b, len, a)) < 0)
		return r == -ENODATA ? -EUCLEAN : r;
	if ((r = fx_w_states_read(d, a, d->wal_end, st)) < 0)
		return r;
	for (uint64_t off = a; off < d->wal_end;) {
		struct wrec h;
		struct went e;
		uint64_t p, end;
		uint32_t state;

		if (d->wal_end - off < sizeof(h))
			return -EUCLEAN;
		memcpy(&h, b + (off - a), sizeof(h));
		if (h.magic != W_REC_MAGIC || h.salt != d->wal_salt ||
		    h.len > d->wal_end - off - sizeof(h))
			return -EUCLEAN; /* the hint points at no record: damage */
		state = h.state == WS_CANCELLED ? WS_CANCELLED :
			fx_w_state_in(d, st, a, off);
		p = off + sizeof(h);
		end = p + h.len;
		off = rec_next(off, &h);
		if (!WS_OPEN(state))
			continue;
		for (uint32_t k = 0; k < h.nent; k++) {
			if (end - p < sizeof(e))
				return -EUCLEAN;
			memcpy(&e, b + (p - a), sizeof(e));
			if (W_IS_NAME(e.kind) || ent_in(&e, set, n))
				return 1;
			if ((p = fx_w_ent_next(p, end, &e)) > end)
				return -EUCLEAN;
		}
	}
	return 0;
}

/* Does an open record change an inode of set, or make a name?  1, 0,
 * -errno (W4). */
static int wal_conflicts(struct fstx_domain *d, const uint64_t *set, size_t n)
{
	if (d->wal_applied >= d->wal_end)
		return 0;
	if (d->wal_end - d->wal_applied > fx_wal_window)
		return conflicts_read(d, set, n);
	return conflicts_mem(d, set, n);
}

/* The inodes the transaction changes or asserts on, into ino[] (W4). */
static void assert_inodes(struct fstx_domain *d, const struct plan *P,
			  uint64_t *ino)
{
	for (size_t i = 0; i < P->nops; i++) {
		uint32_t op = (uint32_t)P->ops[i].op;
		struct stat st;

		if ((op == FSTX_OP_ASSERT_DATA || op == FSTX_OP_ASSERT_XATTR) &&
		    P->pops[i].cpath && fx_lstat(d, P->pops[i].cpath, &st) == 0)
			ino[i] = (uint64_t)st.st_ino;
	}
}

/*
 * Append the record at the log's end under the lock (W3), with its state
 * word implied (PENDING: no word of this salt).  0 appended
 * (its offset in *at), or -errno with nothing appended.
 */
static int append(struct fstx_domain *d, const struct plan *P,
		  const int *tgt, const uint64_t *ino, const char *const *fpath,
		  const struct wname *nm, size_t nnm, const struct wclone *cl,
		  uint64_t *at, int lazy_rec)
{
	uint64_t end = 0;
	int r;

	*at = d->wal_end;
	if ((r = fx_w_write_record(d, P, tgt, ino, fpath, nm, nnm, cl, &end)) < 0 ||
	    (r = fx_w_grow(d, end)) < 0)
		goto undo;
	uint64_t lazy = d->wal_lazy;

	d->wal_end = end;
	if (lazy_rec)
		d->wal_lazy = end;
	if (!d->nosync)
		d->wal_kept = 1; /* W11 */
	if ((r = fx_w_hint_write(d)) < 0) {
		d->wal_end = *at;
		d->wal_lazy = lazy;
		goto undo;
	}
	return 0;
undo:
	if (fx_w_rec_unwrite(d, *at) < 0)
		d->latched = d->latched ? d->latched : -EIO;
	return r;
}

/* The results of a transaction a helper applied. */
static void results(struct btrfs_ioctl_usertrans *ut, const struct plan *P,
		    const int64_t *res)
{
	struct btrfs_ioctl_usertrans_op *ops = (void *)(intptr_t)ut->ops_ptr;

	for (size_t i = 0; i < P->nops; i++)
		ops[i].rval = res[i];
	ut->ops_completed = P->nops;
}

/*
 * After the barrier, under the lock again: was the record at `at` (salt
 * `salt`) applied by a helper?  1 yes, 0 no (it is PENDING), -errno.
 */
static int applied_meanwhile(struct fstx_domain *d, uint64_t at, uint64_t salt)
{
	int fresh, r = fx_w_load(d, &fresh);

	if (r < 0)
		return r;
	if (d->wal_salt != salt)
		return 1; /* checkpointed: every record was applied first (W6) */
	if (!fresh || at < W_START || at >= d->wal_end)
		return -EUCLEAN;
	if (d->wal_busy && (r = fx_w_help(d)) < 0) /* an applier cut short */
		return r;
	/* a help pass moves APPLIED past every record it applies; only the
	 * record's own writer writes its state word */
	return at < d->wal_applied;
}

/*
 * W3: the record at `at`, whose barrier failed, is cancelled: in the log
 * (fx_w_rec_cancel(), so that replay after power loss skips it too) and in
 * its state word, unless a helper applied it while this writer had the
 * lock dropped (unlocked): a helper's own barrier covered it, so it is
 * committed and the error stands as one after the commit point.  The
 * range the failed barrier was to make durable is published (the group
 * path did at the barrier) and written again with the cancel in it, then
 * synced (fx_w_mend()).  The caller returns the barrier's error whatever
 * happens here.
 */
static void cancel(struct fstx_domain *d, uint64_t at, uint64_t salt, int unlocked)
{
	int m = unlocked ? applied_meanwhile(d, at, salt) : 0;

	if (m > 0)
		return;
	/* the log's state unknown (m < 0): its word only, of its salt */
	if (m == 0) {
		(void)fx_w_rec_cancel(d, at);
		if (fx_w_group_fail(d, salt, W_START) == 0)
			(void)fx_w_mend(d);
		else
			(void)fx_os.fdatasync(d->wal);
	}
	if (fx_w_set_state(d, at, WS_CANCELLED) == 0)
		(void)fx_w_advance(d);
}

/* The inodes P appends to (O_APPEND writes, W14), into set (at most
 * P->nops): their count. */
static size_t append_inodes(const struct plan *P, const int *tgt, const uint64_t *ino,
		       uint64_t *set)
{
	size_t n = 0;

	for (size_t i = 0; i < P->nops; i++)
		if (P->ops[i].op == BTRFS_IOC_UT_OP_PWRITE && P->pops[i].append &&
		    !fx_pop_dead(P, i))
			set[n++] = ino[tgt[i]];
	return n;
}

/* Does P read the tree: a compare op, or an xattr op that must find the
 * xattr as it needs (a removal, create or replace: trans.c
 * xattr_as_needed())?  W10: such a lazy transaction is not queued behind
 * lazy records unapplied. */
static int reads_tree(const struct plan *P)
{
	for (size_t i = 0; i < P->nops; i++) {
		const struct btrfs_ioctl_usertrans_op *op = &P->ops[i];

		if (fx_op_is_assert(op->op) || op->op == BTRFS_IOC_UT_OP_REMOVEXATTR ||
		    (op->op == BTRFS_IOC_UT_OP_SETXATTR && op->args[4]))
			return 1;
	}
	return 0;
}

/*
 * W10: a lazy record is committed once appended: its results are the
 * predicted ones; a flush makes it durable and applies it when the open
 * records pass fx_lazy_max bytes (or a reader, another kind of
 * transaction, fstx_sync() or the handle's close comes first).
 */
static long lazy_done(struct fstx_domain *d, struct btrfs_ioctl_usertrans *ut,
		      const struct plan *P, const int64_t *res)
{
	int r = 0;

	results(ut, P, res);
	d->lazy_wrote = 1;
	if (d->wal_end - d->wal_applied > fx_lazy_max)
		r = fx_w_help(d);
	if (r >= 0 && d->wal_end - W_START > fx_wal_max)
		r = checkpoint(d, 1);
	if (r < 0 && !d->latched)
		d->latched = r; /* committed: a later call sees the error */
	return 0;
}

long fx_wal_commit(struct fstx_domain *d, struct btrfs_ioctl_usertrans *ut,
		   const struct plan *P, const int64_t *res)
{
	size_t n = P->nops ? P->nops : 1;
	int *fds = fx_malloc(2 * n * sizeof(int));
	struct tfds F = { .fd = fds, .flags = fds ? fds + n : NULL,
			  .own = fx_calloc(n, 1) };
	int *slot_op = fx_calloc(ut->num_fds ? ut->num_fds : 1, sizeof(int));
	int *tgt = fx_calloc(n, sizeof(int)); /* pwrite: index of its open */
	uint64_t *ino = fx_calloc(n, sizeof(uint64_t)), at, salt, rec_end;
	struct wname *nm = fx_calloc(P->nsteps + 1, sizeof(*nm));
	const char **fpath = fx_calloc(n, sizeof(*fpath));
	char **fown = fx_calloc(n, sizeof(*fown)); /* fpath[i], allocated */
	uint64_t *cset = fx_calloc(2 * n + 2 * P->nsteps + 3, sizeof(*cset)); /* + W14's */
	struct wclone *cl = fx_calloc(n, sizeof(*cl));
	struct btrfs_ioctl_usertrans_op *ops2 = NULL;
	struct plan P2;
	size_t nnm = 0, na;
	int rs = 0, appended = 0, pre = 0, staged = 0;
	long r;
	size_t i;

	d->wal_owed = 0;
	r = -ENOMEM;
	if (!fds || !F.own || !slot_op || !tgt || !ino || !nm || !fpath || !fown || !cset || !cl)
		goto out;
	for (i = 0; i < n; i++)
		fds[i] = cl[i].fd = -1;
	{
		char epoch[37];

		/* W5: no epoch (no boot id), no notes to trust: the undo way */
		if ((r = fx_epoch_id(d, epoch)) < 0) {
			r = r == -ENOENT ? 1 : r;
			goto out;
		}
	}
	if (!d->wal_salt && (r = wal_reset(d, 0)) < 0)
		goto out;
	/* W15: no record before this one names an object it renames */
	if ((r = moves_first(d, P)) < 0)
		goto out;
	nnm = fx_w_names_of(d, P, nm);
	if (nnm)
		d->lazy = 0; /* W10: names are never queued */
	/* Anything unexpected before the commit point: decline (undo way). */
	for (i = 0; i < nnm; i++)
		if (!nm[i].path)
			nnm = 0; /* a new object that no step names: never planned */
	if ((P->nsteps && !nnm) || fx_w_batch_dirs(d, nm, nnm) < 0 || fx_w_stage_dirs(d, nm, nnm) < 0 ||
	    open_targets(d, P, &F, ino, slot_op, tgt, nm, nnm) < 0 ||
	    fx_w_stage_links(d, nm, nnm) < 0 || fx_w_removal_declined(d, P, ino, nm, nnm) ||
	    fx_w_move_declined(d, P, nm, nnm) || fx_w_perm_declined(d, P, nm, nnm)) {
		r = 1;
		goto out;
	}
	fx_w_link_inodes(nm, nnm); /* W16: new files' links, once staged */
	if (fx_w_inherit_groups(d, P, nm, nnm)) {
		r = 1; /* W26 */
		goto out;
	}
	if ((r = fx_w_final_paths(P, tgt, ino, nm, nnm, fpath, fown)) != 0)
		goto out; /* 1: a path too long for an entry, the undo way */
	assert_inodes(d, P, ino);
	/* W4: the inodes it removes are touched too */
	for (size_t k = 0; k < nnm; k++) {
		if (nm[k].kind == W_UNLINK || nm[k].kind == W_MOVE || nm[k].kind == W_SWAP)
			cset[n + k] = nm[k].ino;
		if (nm[k].kind == W_SWAP)
			cset[n + nnm + k] = nm[k].ino2;
	}
	memcpy(cset, ino, n * sizeof(*ino));
	/* an xattr op found not as it needs and made dead read its object
	 * in the tree (trans.c wal_fit()): an open record that changes it
	 * is applied first, and the transaction judged again */
	for (i = 0; i < P->nops; i++)
		if (fx_pop_dead(P, i) && P->pops[i].obj > 0 &&
		    (P->ops[i].op == BTRFS_IOC_UT_OP_SETXATTR ||
		     P->ops[i].op == BTRFS_IOC_UT_OP_REMOVEXATTR))
			cset[i] = (uint64_t)P->pops[i].obj;
	/*
	 * W4, W10: open lazy records are flushed before anything but a lazy
	 * transaction that does not read the tree (reads_tree(): it may
	 * queue behind them), unless an open record has name entries (its
	 * plan saw the tree without them: a writer at its barrier or killed
	 * there; none when the log's last record is this handle's lazy one,
	 * as every earlier one was looked at when it was not); else a
	 * transaction helps only when it shares an inode with an open record.
	 */
	if (d->lazy && !reads_tree(P) && (na = append_inodes(P, tgt, ino, cset + n + 2 * nnm)))
		r = wal_conflicts(d, cset + n + 2 * nnm, na); /* W14: their sizes */
	else if (d->lazy && !reads_tree(P))
		r = d->wal_end == d->wal_lazy ? 0 : wal_conflicts(d, NULL, 0);
	else if (d->wal_lazy > d->wal_applied || (d->lazy && d->wal_applied < d->wal_end))
		r = 1;
	else
		r = wal_conflicts(d, cset, n + 2 * nnm);
	if (r != 0) {
		if (r > 0 && (r = fx_w_help(d)) >= 0)
			r = 2; /* the tree moved on: plan again */
		goto out;
	}
	/* W14: O_APPEND writes at the sizes found now, as fixed offsets */
	if ((r = append_offsets(P, fds, tgt, ino, &ops2)) != 0)
		goto out;
	if (ops2) {
		P2 = *P;
		P2.ops = ops2;
		P = &P2;
	}
	if (!fx_w_rec_entries(P, tgt, ino, fpath, nnm)) {
		/* reads and compare ops only (their inodes helped above):
		 * nothing to log, no barrier */
		results(ut, P, res);
		r = 0;
		goto out;
	}
	/* W13: large overwrites staged, durable before the record */
	if ((staged = fx_w_stage_writes(d, P, tgt, fds, ut->flags, cl)) < 0 ||
	    fx_w_apply_whole(d, P, fds, tgt, nm, nnm, ut->flags, cl) < 0) {
		r = 1; /* the undo way meets the error and rolls back */
		goto out;
	}
	if (d->nosync)
		d->wal_busy = 1; /* W7: applied at once, under the lock */
	if ((r = append(d, P, tgt, ino, fpath, nm, nnm, cl, &at, d->lazy)) < 0) {
		d->wal_busy = 0;
		goto out;
	}
	appended = 1;
	salt = d->wal_salt;
	rec_end = d->wal_end;
	if (d->lazy) {
		r = lazy_done(d, ut, P, res);
		goto out;
	}
	if (!d->nosync) {
		/* W3: sync with the lock dropped, so others append meanwhile
		 * (not on tmpfs: there is no device flush to share) */
		int debt = d->wal_loose || d->nosync_undo;
		int share = d->fs.magic != TMPFS_MAGIC && !debt;

		/* W3: a large record's write-out starts while the new files
		 * get their data (no name shows them yet, W2) */
		if (nnm && rec_end - at >= FX_W_OVERLAP) {
			(void)fx_os.writeback(d->wal);
			pre = fx_w_apply_new(P, fds, tgt, cl);
		}

		/* W11: and what the last checkpoint left; or this handle's
		 * crash-only transactions of the undo way (trans.c) */
		if (debt)
			rs = pay_debts(d);
		else if (!share)
			rs = fx_w_log_sync(d);
		else {
			fx_unlock(d);
			rs = fx_w_group_sync(d, salt, d->wal_end);
			if ((r = fx_lock(d)) < 0) {
				d->latched = (int)r; /* stays PENDING for a helper */
				goto out;
			}
			/* a failed barrier first: the record is cancelled
			 * (W3) unless a helper applied it meanwhile */
			if (rs == 0 && (r = applied_meanwhile(d, at, salt)) != 0) {
				if (r > 0)
					results(ut, P, res);
				else if (!d->latched)
					d->latched = (int)r; /* durable: a helper applies it */
				r = r > 0 ? 0 : r;
				goto out;
			}
		}
		/* W3: a failed barrier's range written again first, so that
		 * the log on the disk runs on to this record */
		if (rs == 0)
			rs = fx_w_mend(d);
		if (rs < 0) {
			d->latched = rs;
			cancel(d, at, salt, share);
			r = rs;
			goto out;
		}
	}
	/* Committed (W3).  Apply in place (W4), busy in the hint. */
	if (!d->nosync) {
		d->wal_busy = 1;
		d->wal_loose = 0;
		d->nosync_undo = 0;
		if ((r = fx_w_hint_write(d)) < 0) {
			d->latched = (int)r; /* still PENDING: a helper applies it */
			goto out;
		}
	}
	if ((r = fx_w_apply_all(d, ut, P, res, fds, tgt, nm, nnm, cl, pre)) < 0)
		goto out; /* busy stays: the next lock holder applies it */
	/* the first open record: APPLIED moves past it, no state word needed;
	 * staged data is dropped at once (W13) */
	int first = at == d->wal_applied,
	    full = d->wal_end - W_START > fx_wal_max || staged > 0;

	if (first)
		d->wal_applied = rec_end;
	else
		r = fx_w_set_state(d, at, WS_APPLIED);
	d->wal_busy = 0;
	if (first && d->nosync && d->wal_mine && !full)
		d->wal_unsaid = 1; /* W12: the hint still says busy over it */
	else if (r == 0)
		r = fx_w_advance(d);
	if (r == 0 && full)
		r = checkpoint(d, 1);
	if (r < 0 && !d->latched)
		d->latched = (int)r;
	r = 0; /* committed and applied; a later call sees the latched error */
out:
	if (r < 0 && appended)
		d->wal_owed = 1; /* fx_wal_owed() */
	if (!appended && nm)
		fx_w_unstage(d, nm, nnm); /* declined, planning again, or failed */
	if (cl)
		fx_w_drop_writes(d, cl, n, !appended);
	if (fds && F.own)
		close_targets(d, &F, ino, n);
	fx_w_free_stages(nm, P->nsteps + 1);
	free(nm);
	free(fpath);
	for (i = 0; fown && i < n; i++)
		free(fown[i]);
	free(fown);
	free(cset);
	free(cl);
	free(ops2);
	free(fds);
	free(F.own);
	free(slot_op);
	free(tgt);
	free(ino);
	return r;
}
