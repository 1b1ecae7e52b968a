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

LIB_SRC := src/os.c src/crc32c.c src/domain.c src/journal.c src/plan.c \
	   src/trans.c src/api.c src/txtext.c src/fsfacts.c
LIB_OBJ := $(LIB_SRC:src/%.c=$(B)/%.o)
SOVER := 0

TESTS := test_abi test_ops test_rollback test_crash test_txtext test_powerloss test_large test_journal
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

$(B)/fstx: src/cli.c $(B)/libfstx.a
	$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ src/cli.c $(B)/libfstx.a

$(B)/test_%: test/test_%.c test/helpers.c test/*.h test/faultos.c $(B)/libfstx.a
	$(CC) $(ALL_CFLAGS) -Wno-missing-prototypes $(LDFLAGS) -o $@ $< test/helpers.c \
		test/faultos.c $(B)/libfstx.a -lcmocka

$(B)/seed_usertrans $(B)/ergonomic: $(B)/%: examples/%.c $(B)/libfstx.a
	$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $< $(B)/libfstx.a

$(B)/bench_overwrite: bench/overwrite.c $(B)/libfstx.a
	$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $< $(B)/libfstx.a

# Figures, not tests: workload (d) on every filesystem.
bench: all $(B)/bench_overwrite
	@bash bench/run.sh $(B)

deps:
	@bash tools/deps.sh

EXAMPLES := $(B)/seed_usertrans $(B)/ergonomic

# The whole suite on every filesystem, then once more under ASan+UBSan.
check: deps all $(TEST_BIN) $(EXAMPLES)
	@bash test/run.sh $(B)
	@$(MAKE) --no-print-directory SAN=1 check-san

check-san: all $(TEST_BIN) $(EXAMPLES)
	@ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1 FSTX_MATRIX= FSTX_CORPUS_FIRST=12 FSTX_LARGE_MB=64 \
		FSTX_LABEL=asan+ubsan bash test/run.sh $(B)

# The whole crash/error harness: every corpus transaction on every filesystem.
crashtest: deps all $(TEST_BIN)
	@FSTX_CORPUS_OTHERS=0 FSTX_SUITES="test_rollback test_crash test_powerloss" \
		bash test/run.sh $(B)

demo: $(B)/fstx
	@bash examples/demo.sh $(B)/fstx

clean:
	rm -rf build build-san

.PHONY: all check check-san crashtest demo clean deps bench
