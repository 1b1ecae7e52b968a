# SPDX-License-Identifier: MIT
# fstx - atomic multi-file transactions.  See README.md.
PREFIX ?= /usr/local
DESTDIR ?=
CC ?= cc
SAN ?=
WARN := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes
CFLAGS ?= -O2 -g
ifeq ($(SAN),1)
CFLAGS := -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
LDFLAGS += -fsanitize=address,undefined
endif
ALL_CFLAGS := -std=gnu11 $(WARN) -Iinclude -Isrc -fPIC $(CFLAGS)
B := build$(if $(SAN),-san)

LIB_SRC := src/os.c src/crc32c.c src/syncset.c src/recover.c src/domain.c src/journal.c src/plan.c \
	   src/trans.c src/api.c src/txtext.c src/fsfacts.c src/wal.c src/wal_rec.c src/wal_apply.c \
	   src/wal_note.c src/wal_group.c src/wal_debt.c src/wal_stage.c src/itx.c \
	   $(wildcard src/task.c)
LIB_OBJ := $(LIB_SRC:src/%.c=$(B)/%.o)
SOVER := 0
VERSION := $(shell sed -n 's/^\#define FSTX_VERSION_STRING "\(.*\)"/\1/p' include/fstx.h)
LIBDIR ?= $(PREFIX)/lib
BINDIR ?= $(PREFIX)/bin
INCDIR ?= $(PREFIX)/include
MANDIR ?= $(PREFIX)/share/man
PCDIR ?= $(LIBDIR)/pkgconfig
INSTALL ?= install

TESTS := test_abi test_ops test_rollback test_crash test_txtext test_powerloss test_large test_journal \
	test_race test_bank test_wal test_itx test_lazy
TEST_BIN := $(TESTS:%=$(B)/%)

all: $(B)/libfstx.a $(B)/libfstx.so.$(SOVER) $(B)/fstx

$(B)/%.o: src/%.c src/*.h include/fstx.h include/fstx/*.h | $(B)
	$(CC) $(ALL_CFLAGS) -c -o $@ $<

$(B):
	mkdir -p $(B)

$(B)/libfstx.a: $(LIB_OBJ)
	ar rcs $@ $^

$(B)/libfstx.so.$(SOVER): $(LIB_OBJ) src/libfstx.map
	$(CC) -shared -Wl,-soname,libfstx.so.$(SOVER) -Wl,--version-script=src/libfstx.map \
		$(LDFLAGS) -o $@ $(LIB_OBJ)
	ln -sf libfstx.so.$(SOVER) $(B)/libfstx.so

# The command reads JSON input with jansson (only the command: the library
# has no JSON).
$(B)/fstx: src/cli.c src/cli_json.c src/cli_json.h $(B)/libfstx.a
	$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ src/cli.c src/cli_json.c $(B)/libfstx.a -ljansson

$(B)/test_%: test/test_%.c test/helpers.c test/*.h test/faultos.c $(B)/libfstx.a
	$(CC) $(ALL_CFLAGS) -Wno-missing-prototypes -DT_SRCDIR='"$(CURDIR)"' $(LDFLAGS) \
		-o $@ $< test/helpers.c test/faultos.c $(B)/libfstx.a -lcmocka

$(B)/seed_usertrans $(B)/ergonomic $(B)/interactive: $(B)/%: examples/%.c $(B)/libfstx.a
	$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $< $(B)/libfstx.a

# fsync, fdatasync and syncfs are interposed to count barriers, also those
# libsqlite3 makes: -rdynamic exports them to it.
$(B)/fstxbench: bench/fstxbench.c $(B)/libfstx.a
	$(CC) $(ALL_CFLAGS) $(LDFLAGS) -rdynamic -o $@ $< $(B)/libfstx.a -lsqlite3

# The recorder of the block-level power-loss check (libfuse3).
$(B)/blkrec: tools/blkrec/blkrec.c | $(B)
	$(CC) -std=gnu11 $(WARN) $(CFLAGS) $(shell pkg-config --cflags fuse3) -o $@ $< \
		$(shell pkg-config --libs fuse3)

# Power loss on the real block I/O of ext4, xfs and btrfs: every workload,
# variant and crash state (docs/powerloss-block.md).  Needs root.
crashtest-block: all $(B)/blkrec
	python3 test/blockcrash/blockcrash.py run --fstx $(B)/fstx --blkrec $(B)/blkrec \
		--workload all,standin

# Figures, not tests: every workload and method on every filesystem.
bench: all $(B)/fstxbench
	@bash bench/run.sh $(B)

deps:
	@bash tools/deps.sh

EXAMPLES := $(B)/seed_usertrans $(B)/ergonomic $(B)/interactive

# Static analysis: cppcheck over the library and the CLI, warnings are errors.
lint:
	cppcheck --quiet --error-exitcode=1 --enable=warning,portability --std=c11 \
		-Iinclude -Isrc --suppress=missingIncludeSystem src/ bench/

# The whole suite on every filesystem (a sample of the crash/error corpus:
# 6 transactions on the first filesystem, 3 on the others, 64 MiB for
# test_large; make crashtest runs all of the corpus), then once more under
# ASan+UBSan, then fuzzing.  About 35 minutes on 2 CPUs.
check: deps all $(TEST_BIN) $(EXAMPLES) $(B)/fstxbench
	@$(MAKE) --no-print-directory lint
	@FSTX_CORPUS_FIRST=$${FSTX_CORPUS_FIRST-6} FSTX_CORPUS_OTHERS=$${FSTX_CORPUS_OTHERS-3} \
		FSTX_CALL_STRIDE_OTHERS=$${FSTX_CALL_STRIDE_OTHERS-4} \
		FSTX_LARGE_MB=$${FSTX_LARGE_MB-64} FSTX_BANK_TX_FIRST=$${FSTX_BANK_TX_FIRST-300} \
		FSTX_NAMES_FIRST=$${FSTX_NAMES_FIRST-6} FSTX_NAMES_OTHERS=$${FSTX_NAMES_OTHERS-1} \
		FSTX_NAMES_STATES=$${FSTX_NAMES_STATES-10} \
		bash test/run.sh $(B)
	@$(MAKE) --no-print-directory SAN=1 check-san
	@$(MAKE) --no-print-directory -j2 fuzz-build
	@$(MAKE) --no-print-directory fuzz FUZZ_TIME=5

check-san: all $(TEST_BIN) $(EXAMPLES) $(B)/fstxbench
	@ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1 FSTX_MATRIX= FSTX_PACKAGING=0 \
		FSTX_BLOCKCRASH=0 FSTX_CORPUS_FIRST=3 FSTX_LARGE_MB=32 FSTX_BANK_TX_FIRST=100 \
		FSTX_CALL_STRIDE_FIRST=4 FSTX_PL_STATES=10 FSTX_NAMES_FIRST=1 \
		FSTX_SUITES="test_abi test_ops test_txtext test_rollback test_powerloss \
		test_large test_journal test_race test_bank test_wal test_itx test_lazy cli.bats" \
		FSTX_LABEL=asan+ubsan bash test/run.sh $(B)

# The whole crash/error harness: every corpus transaction on every filesystem,
# and the generated name changes of test/names.tx; NAMES_SEED=S NAMES_N=K: K fresh
# ones from seed S instead (test/gen_names.py).
crashtest: deps all $(TEST_BIN)
	@if [ -n "$(NAMES_SEED)" ]; then python3 test/gen_names.py $(NAMES_SEED) $(or $(NAMES_N),40) \
		> $(B)/names-$(NAMES_SEED).tx; fi
	@$(if $(NAMES_SEED),FSTX_NAMES_TX=$(CURDIR)/$(B)/names-$(NAMES_SEED).tx) \
		FSTX_PL_STATES=$${FSTX_PL_STATES-60} FSTX_BLOCKCRASH=0 FSTX_CORPUS_OTHERS=0 FSTX_CALL_STRIDE_OTHERS=1 \
		FSTX_SUITES="test_rollback test_crash test_powerloss test_wal" \
		bash test/run.sh $(B)
	@$(MAKE) --no-print-directory crashtest-block

# Man pages: one per function group; the other function names are symlinks.
MAN1 := man/fstx.1
MAN3 := $(wildcard man/*.3)
MAN5 := man/fstx-tx.5
MAN7 := man/fstx.7
# name:page pairs for the functions documented on a group page
MAN3_LINKS := $(shell sed -n 's/^\.\\" links: //p' $(MAN3))

install: all
	$(INSTALL) -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR) $(DESTDIR)$(PCDIR) \
		$(DESTDIR)$(INCDIR)/fstx $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man3 \
		$(DESTDIR)$(MANDIR)/man5 $(DESTDIR)$(MANDIR)/man7
	$(INSTALL) -m 755 $(B)/fstx $(DESTDIR)$(BINDIR)/fstx
	$(INSTALL) -m 644 $(B)/libfstx.a $(DESTDIR)$(LIBDIR)/libfstx.a
	$(INSTALL) -m 755 $(B)/libfstx.so.$(SOVER) $(DESTDIR)$(LIBDIR)/libfstx.so.$(VERSION)
	ln -sf libfstx.so.$(VERSION) $(DESTDIR)$(LIBDIR)/libfstx.so.$(SOVER)
	ln -sf libfstx.so.$(SOVER) $(DESTDIR)$(LIBDIR)/libfstx.so
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' -e 's|@VERSION@|$(VERSION)|' \
		fstx.pc.in > $(DESTDIR)$(PCDIR)/fstx.pc
	$(INSTALL) -m 644 include/fstx.h $(DESTDIR)$(INCDIR)/fstx.h
	$(INSTALL) -m 644 include/fstx/*.h $(DESTDIR)$(INCDIR)/fstx/
	$(INSTALL) -m 644 $(MAN1) $(DESTDIR)$(MANDIR)/man1/
	$(INSTALL) -m 644 $(MAN3) $(DESTDIR)$(MANDIR)/man3/
	$(INSTALL) -m 644 $(MAN5) $(DESTDIR)$(MANDIR)/man5/
	$(INSTALL) -m 644 $(MAN7) $(DESTDIR)$(MANDIR)/man7/
	@for l in $(MAN3_LINKS); do \
		ln -sf $${l#*:}.3 $(DESTDIR)$(MANDIR)/man3/$${l%%:*}.3; \
	done

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/fstx $(DESTDIR)$(LIBDIR)/libfstx.a \
		$(DESTDIR)$(LIBDIR)/libfstx.so $(DESTDIR)$(LIBDIR)/libfstx.so.$(SOVER) \
		$(DESTDIR)$(LIBDIR)/libfstx.so.$(VERSION) $(DESTDIR)$(PCDIR)/fstx.pc \
		$(DESTDIR)$(INCDIR)/fstx.h
	rm -f $(addprefix $(DESTDIR)$(INCDIR)/fstx/,$(notdir $(wildcard include/fstx/*.h)))
	-rmdir $(DESTDIR)$(INCDIR)/fstx 2>/dev/null
	rm -f $(addprefix $(DESTDIR)$(MANDIR)/man1/,$(notdir $(MAN1))) \
		$(addprefix $(DESTDIR)$(MANDIR)/man3/,$(notdir $(MAN3))) \
		$(addprefix $(DESTDIR)$(MANDIR)/man5/,$(notdir $(MAN5))) \
		$(addprefix $(DESTDIR)$(MANDIR)/man7/,$(notdir $(MAN7)))
	@for l in $(MAN3_LINKS); do rm -f $(DESTDIR)$(MANDIR)/man3/$${l%%:*}.3; done

# Fuzzing (libFuzzer, clang): each target runs FUZZ_TIME seconds on a copy of
# its seed corpus in fuzz/corpus/, after replaying fuzz/regress/.
FUZZ_CC ?= clang
FUZZ_TIME ?= 60
FUZZ_TARGETS := fuzz_txtext fuzz_txdiff fuzz_abi fuzz_journal fuzz_wal fuzz_walsync fuzz_json
FB := build-fuzz
FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=all
FUZZ_FLAGS := -std=gnu11 $(WARN) -Wno-missing-prototypes -Iinclude -Isrc -Itest -g -O1 \
	-fno-omit-frame-pointer $(FUZZ_SAN)
FUZZ_LIB := $(LIB_SRC) test/helpers.c test/faultos.c

$(FB)/fuzz_%: fuzz/fuzz_%.c fuzz/common.h $(FUZZ_LIB) src/*.h include/fstx.h test/*.h
	@mkdir -p $(FB)
	$(FUZZ_CC) $(FUZZ_FLAGS) -fsanitize=fuzzer -o $@ $< $(FUZZ_LIB)

# JSON input needs jansson; an explicit rule wins over the fuzz_% pattern
$(FB)/fuzz_json: fuzz/fuzz_json.c fuzz/common.h src/cli_json.c src/cli_json.h $(FUZZ_LIB) \
		src/*.h include/fstx.h test/*.h
	@mkdir -p $(FB)
	$(FUZZ_CC) $(FUZZ_FLAGS) -fsanitize=fuzzer -o $@ $< src/cli_json.c $(FUZZ_LIB) -ljansson

fuzz-build: $(FUZZ_TARGETS:%=$(FB)/%)

fuzz: fuzz-build
	@bash fuzz/run.sh $(FB) $(FUZZ_TIME) $(FUZZ_TARGETS)

# Line coverage of the library by the suites (gcov; not part of check): the
# suites on the scratch directory's filesystem (FSTX_MATRIX to add others),
# 12 corpus transactions, then the lines each source file ran.  A line that
# never ran is an error path no test forces, or code to remove.
coverage:
	@$(MAKE) --no-print-directory B=build-cov CFLAGS="-O0 -g --coverage" \
		LDFLAGS=--coverage all $(TESTS:%=build-cov/%) $(EXAMPLES:$(B)/%=build-cov/%) \
		build-cov/fstxbench
	@rm -f build-cov/*.gcda
	@FSTX_MATRIX="$${FSTX_MATRIX-}" FSTX_PACKAGING=0 FSTX_CORPUS_FIRST=12 \
		FSTX_LABEL=coverage bash test/run.sh build-cov || true
	@for f in $(LIB_SRC); do \
		printf '%-16s ' "$$f"; \
		gcov -n -o build-cov "$$f" 2>/dev/null | grep -A1 -F "File '$$f'" | tail -n 1; \
	done

demo:
	@$(MAKE) -s --no-print-directory $(B)/fstx
	@bash examples/demo.sh $(B)/fstx

clean:
	rm -rf build build-san build-fuzz build-cov

.PHONY: lint all check check-san crashtest crashtest-block demo clean deps bench install uninstall fuzz fuzz-build \
	coverage
