#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# report.sh OUT_DIR - OUT_DIR/results.tsv (fstxbench lines) to
# OUT_DIR/README.md (tables, ratios, targets) and OUT_DIR/*.png (gnuplot).
set -eu
OUT=$1
TSV=$OUT/results.tsv
# CPUs of the machine that ran the figures (machine.md), else of this one
NCPU=$(sed -n 's/^- cpu: \([0-9]*\) x.*/\1/p' "$OUT/machine.md" 2>/dev/null || true)
NCPU=${NCPU:-$(nproc)}
[ -s "$TSV" ] || { echo "report.sh: no results in $TSV" >&2; exit 1; }
# the hand-written block of the README (notes begin .. notes end), kept
NOTES=$(sed -n '/^<!-- notes begin/,/^<!-- notes end -->/p' "$OUT/README.md" 2>/dev/null || true)
# The e8/e1 that e8 would reach with n resources (CPUs, or a device that
# serves one request at a time) always busy, each transaction costing e8's
# measured time of them: cost (us/tx) and e1's tx/s; n/a where unknown.
BOUND='function xbound(n, cost, e1) {
	return (n > 0 && cost > 0 && e1 > 0) ? sprintf("%.2f", n * 1e6 / cost / e1) : "n/a" }'

desc() {
	case $1 in
	a) echo "4 files x 4 KiB overwrite + 1 xattr each" ;;
	b) echo "1 new 1 MiB file renamed into place + unlink of an old one" ;;
	c) echo "100 files of 512 bytes created in a new directory" ;;
	d) echo "64 MiB overwrite of an existing file" ;;
	e1) echo "4 KiB overwrite + xattr of one file, 1 process" ;;
	e8) echo "the same, 8 processes at once on disjoint files of one domain" ;;
	f) echo "10000 files of 512 bytes in a new directory (transaction size)" ;;
	g) echo "object put: new 4 KiB object + user xattr, 256-byte index overwritten in place" ;;
	n) echo "(g) while a neighbour process keeps 256 MiB dirty on the same filesystem" ;;
	h) echo "a directory of 20 files of 4 KiB switched for a new one, the old one removed" ;;
	esac
}
{
	echo "# fstx benchmark results"
	echo
	echo "Produced by \`make bench\` (bench/run.sh, bench/fstxbench.c); raw figures in"
	echo "results.tsv. Machine:"
	echo
	cat "$OUT/machine.md" 2>/dev/null || true
	echo
	echo "Latency is per transaction (median and 99th percentile over all rounds)."
	echo "Barriers are fsync/fdatasync/syncfs calls per transaction, counted by"
	echo "interposing them (SQLite's included). \"dev B/B\" is bytes written to the block"
	echo "device per byte of payload, after a final (uncounted) syncfs; - on tmpfs."
	echo "\"x rename\" is the rename pattern's median over this one's (above 1: faster);"
	echo "\"/ wal\" is this median over SQLite WAL's (below 1: faster)."
	echo
	[ -z "$NOTES" ] || printf '%s\n\n' "$NOTES"
	echo "## Targets"
	echo
	awk -F'\t' -v ncpu="$NCPU" "$BOUND"'
	{ k = $1 SUBSEP $2 SUBSEP $3; med[k] = $5; p99[k] = $6; tps[k] = $7
	  fss[k] = $8; fds[k] = $9; sfs[k] = $10; rss[k] = $12; cpu[k] = NF >= 13 ? $13 : -1
	  dev[k] = NF >= 14 ? $14 : -1
	  if (!seen[$1]++) fs[++nfs] = $1 }
	function r(x, y) { return (x > 0 && y > 0) ? sprintf("%.2f", x / y) : "n/a" }
	function bound(f, m) { return xbound(ncpu, cpu[f SUBSEP "e8" SUBSEP m], tps[f SUBSEP "e1" SUBSEP m]) }
	function dbound(f, m) { return xbound(1, dev[f SUBSEP "e8" SUBSEP m], tps[f SUBSEP "e1" SUBSEP m]) }
	function us(x) { return x > 0 ? sprintf("%.0f", x) : "n/a" }
	END {
	  print "| fs | (a) fstx x rename (goal >= 5) | (a) fstx-wal x rename | (a) fstx / sqlite-wal (goal <= 1.0) | (a) fstx-wal / sqlite-wal | e8/e1 fstx throughput (goal >= 4) | e8/e1 fstx-wal (CPU bound, device bound) | (a) fstx-crash / raw (goal <= 1.5) | (a) fstx-wal-crash / raw | (a) fstx-lazy / raw (goal <= 1.5): median, throughput | fstx RSS MiB: c (100 files) / f (10000) |"
	  print "|---|---|---|---|---|---|---|---|---|---|---|"
	  for (i = 1; i <= nfs; i++) {
	    f = fs[i]
	    printf "| %s | %s | %s | %s | %s | %s | %s (%s, %s) | %s | %s | %s, %s | %s / %s |\n", f,
	      r(med[f SUBSEP "a" SUBSEP "rename"], med[f SUBSEP "a" SUBSEP "fstx"]),
	      r(med[f SUBSEP "a" SUBSEP "rename"], med[f SUBSEP "a" SUBSEP "fstx-wal"]),
	      r(med[f SUBSEP "a" SUBSEP "fstx"], med[f SUBSEP "a" SUBSEP "sqlite-wal"]),
	      r(med[f SUBSEP "a" SUBSEP "fstx-wal"], med[f SUBSEP "a" SUBSEP "sqlite-wal"]),
	      r(tps[f SUBSEP "e8" SUBSEP "fstx"], tps[f SUBSEP "e1" SUBSEP "fstx"]),
	      r(tps[f SUBSEP "e8" SUBSEP "fstx-wal"], tps[f SUBSEP "e1" SUBSEP "fstx-wal"]),
	      bound(f, "fstx-wal"), dbound(f, "fstx-wal"),
	      r(med[f SUBSEP "a" SUBSEP "fstx-crash"], med[f SUBSEP "a" SUBSEP "raw"]),
	      r(med[f SUBSEP "a" SUBSEP "fstx-wal-crash"], med[f SUBSEP "a" SUBSEP "raw"]),
	      r(med[f SUBSEP "a" SUBSEP "fstx-lazy"], med[f SUBSEP "a" SUBSEP "raw"]),
	      r(tps[f SUBSEP "a" SUBSEP "raw"], tps[f SUBSEP "a" SUBSEP "fstx-lazy"]),
	      rss[f SUBSEP "c" SUBSEP "fstx"], rss[f SUBSEP "f" SUBSEP "fstx"]
	  }
	  print ""
	  print "The other goals of the default way: (b) the rename pattern'"'"'s median over"
	  print "fstx'"'"'s, (c) fstx'"'"'s over SQLite WAL FULL'"'"'s, (d) fstx'"'"'s over pwrite + fsync"
	  print "(raw-fsync); fstx'"'"'s fdatasync calls per transaction (its commit barrier,"
	  print "shared by group commit, and a checkpoint'"'"'s new log header), its fsync calls per"
	  print "transaction (the checkpoints'"'"': each object a record names, once per checkpoint,"
	  print "amortised over the transactions between two checkpoints; staged files of large"
	  print "writes) at the most of any workload, and syncfs calls at the most."
	  print ""
	  print "| fs | (b) fstx x rename (goal >= 1.3) | (c) fstx / sqlite-wal (goal <= 1.3) | (d) fstx / raw-fsync (goal <= 1.3 on xfs and btrfs, 2.2 on ext4) | fdatasync per fstx tx: a / g / b / c (goal 1) | fsync per fstx tx: a / g / b / c / f | syncfs per fstx tx, max (goal 0) |"
	  print "|---|---|---|---|---|---|---|"
	  for (i = 1; i <= nfs; i++) {
	    f = fs[i]; sf = 0
	    for (k in sfs) { split(k, p, SUBSEP)
	      if (p[1] == f && p[3] == "fstx" && sfs[k] > sf) sf = sfs[k] }
	    x = f SUBSEP
	    printf "| %s | %s | %s | %s | %s / %s / %s / %s | %s / %s / %s / %s / %s | %.2f |\n", f,
	      r(med[x "b" SUBSEP "rename"], med[x "b" SUBSEP "fstx"]),
	      r(med[x "c" SUBSEP "fstx"], med[x "c" SUBSEP "sqlite-wal"]),
	      r(med[x "d" SUBSEP "fstx"], med[x "d" SUBSEP "raw-fsync"]),
	      fds[x "a" SUBSEP "fstx"], fds[x "g" SUBSEP "fstx"], fds[x "b" SUBSEP "fstx"],
	      fds[x "c" SUBSEP "fstx"],
	      fss[x "a" SUBSEP "fstx"], fss[x "g" SUBSEP "fstx"], fss[x "b" SUBSEP "fstx"],
	      fss[x "c" SUBSEP "fstx"], fss[x "f" SUBSEP "fstx"], sf
	  }
	  print ""
	  print "Object put (g), and the same while a neighbour process keeps 256 MiB dirty"
	  print "in a file of the same filesystem (n). \"/ sqlite-wal\" is the method'"'"'s (g)"
	  print "median over SQLite WAL FULL'"'"'s; \"x rename\" the rename pattern'"'"'s median over"
	  print "the method'"'"'s (for (n), both beside the neighbour); the (n) median and p99 are"
	  print "set against the same method'"'"'s quiet (g) median."
	  print ""
	  print "| fs | method | (g) / sqlite-wal (goal <= 1.2) | (g) x rename (goal >= 2) | (n) median / (g) median (goal <= 1.5) | (n) p99 / (g) median (goal <= 3) | (n) x rename under the neighbour (goal >= 2) |"
	  print "|---|---|---|---|---|---|---|"
	  split("fstx fstx-wal sqlite-wal rename", gm, " ")
	  for (i = 1; i <= nfs; i++) for (j = 1; j <= 4; j++) {
	    f = fs[i]; g = f SUBSEP "g" SUBSEP gm[j]; n = f SUBSEP "n" SUBSEP gm[j]
	    if (med[g] == "" && med[n] == "") continue
	    printf "| %s | %s | %s | %s | %s | %s | %s |\n", f, gm[j],
	      r(med[g], med[f SUBSEP "g" SUBSEP "sqlite-wal"]),
	      r(med[f SUBSEP "g" SUBSEP "rename"], med[g]),
	      r(med[n], med[g]), r(p99[n], med[g]),
	      r(med[f SUBSEP "n" SUBSEP "rename"], med[n])
	  }
	  print ""
	  print "Concurrent throughput, transactions per second (e1: 1 process, e8: 8)."
	  print "CPU us/tx is the busy time of all " ncpu " CPUs (every process, kernel threads"
	  print "such as a loop device worker, interrupts) per transaction; the CPU bound is the"
	  print "e8/e1 that e8 would reach with every CPU busy at its measured CPU cost per"
	  print "transaction: e8/e1 cannot pass it unless that cost falls. (/proc/stat counts"
	  print "clock ticks, 10 ms here: e1 runs of a few hundred transactions read coarse, n/a"
	  print "where no tick fell in them.) Device us/tx is the time the filesystem'"'"'s block"
	  print "device had I/O in flight (io_ticks, counted in ms) per transaction; the"
	  print "device bound is the e8/e1 that e8 would reach with the device always busy at"
	  print "e8'"'"'s device time per transaction (a loop device serves one request at a time;"
	  print "n/a where it was busy less than a millisecond in the whole run)."
	  print ""
	  print "| fs | method | e1 tx/s | e8 tx/s | e8/e1 | e1 CPU us/tx | e8 CPU us/tx | CPU bound | e1 device us/tx | e8 device us/tx | device bound |"
	  print "|---|---|---|---|---|---|---|---|---|---|---|"
	  split("raw-fsync rename sqlite-wal sqlite-del fstx fstx-crash fstx-wal fstx-wal-crash fstx-lazy", ms, " ")
	  for (i = 1; i <= nfs; i++) for (j = 1; j <= 9; j++) {
	    a = tps[fs[i] SUBSEP "e1" SUBSEP ms[j]]; b = tps[fs[i] SUBSEP "e8" SUBSEP ms[j]]
	    if (a != "" && b != "") printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", fs[i], ms[j], a, b, r(b, a),
	      us(cpu[fs[i] SUBSEP "e1" SUBSEP ms[j]]), us(cpu[fs[i] SUBSEP "e8" SUBSEP ms[j]]), bound(fs[i], ms[j]),
	      us(dev[fs[i] SUBSEP "e1" SUBSEP ms[j]]), us(dev[fs[i] SUBSEP "e8" SUBSEP ms[j]]), dbound(fs[i], ms[j])
	  }
	}' "$TSV"
	if [ -s "$OUT/results-flush.tsv" ]; then
		echo
		us=$(sed -n 's/^- modelled device flush.*: //p' "$OUT/machine.md" 2>/dev/null)
		echo "Concurrent throughput on a modelled device whose cache flush takes ${us:-some time}"
		echo "(\`fstxbench -f\`: after each barrier's call, a wait for a flush that"
		echo "begins after it; one flush at a time, and barriers that ask during"
		echo "one share the next, as the block layer merges flush requests). A"
		echo "loop device's flush is the host's page-cache work, a fraction of a"
		echo "millisecond of CPU; a disk's or a SATA SSD's takes about this long."
		echo
		echo "| fs | method | e1 tx/s | e8 tx/s | e8/e1 | e8 barriers per tx | CPU bound |"
		echo "|---|---|---|---|---|---|---|"
		awk -F'\t' -v ncpu="$NCPU" "$BOUND"'
		{ k = $1 SUBSEP $3; if ($2 == "e1") a[k] = $7
		  if ($2 == "e8") { b[k] = $7; bar[k] = $8 + $9 + $10; c[k] = NF >= 13 ? $13 : -1 }
		  if (!s[k]++) key[++n] = k }
		END { for (i = 1; i <= n; i++) { k = key[i]; split(k, p, SUBSEP)
		  if (a[k] > 0 && b[k] > 0)
		    printf "| %s | %s | %s | %s | %.2f | %.2f | %s |\n", p[1], p[2], a[k], b[k], b[k] / a[k], bar[k],
		      xbound(ncpu, c[k], a[k]) } }' \
			"$OUT/results-flush.tsv"
	fi
	for w in $(cut -f2 "$TSV" | awk '!s[$0]++'); do
		echo
		echo "## ($w) $(desc "$w")"
		echo
		echo "| fs | method | median ms | p99 ms | tx/s | fsync | fdatasync | syncfs | dev B/B | peak RSS MiB | x rename | / wal |"
		echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
		awk -F'\t' -v w="$w" '
		$2 == w { n++; L[n] = $0; if ($3 == "rename") ren[$1] = $5
		          if ($3 == "sqlite-wal") wal[$1] = $5 }
		END { for (i = 1; i <= n; i++) { split(L[i], c, "\t")
		  x = ren[c[1]] ? sprintf("%.2f", ren[c[1]] / c[5]) : "-"
		  y = wal[c[1]] ? sprintf("%.2f", c[5] / wal[c[1]]) : "-"
		  printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
		    c[1], c[3], c[5], c[6], c[7], c[8], c[9], c[10],
		    c[11] < 0 ? "-" : c[11], c[12], x, y } }' "$TSV"
		echo
		echo "![($w)]($w.png)"
	done
} >"$OUT/README.md"
command -v gnuplot >/dev/null || { echo "report.sh: no gnuplot; tables only" >&2; exit 0; }
for w in $(cut -f2 "$TSV" | awk '!s[$0]++'); do
	dat=$(mktemp)
	# rows: methods; columns: filesystems; cells: median ms
	awk -F'\t' -v w="$w" '
	$2 == w { if (!sf[$1]++) fs[++nf] = $1; if (!sm[$3]++) m[++nm] = $3; v[$1, $3] = $5 }
	END { printf "method"; for (j = 1; j <= nf; j++) printf "\t%s", fs[j]; print ""
	      for (i = 1; i <= nm; i++) { printf "%s", m[i]
	        for (j = 1; j <= nf; j++) printf "\t%s", ((fs[j], m[i]) in v) ? v[fs[j], m[i]] : "NaN"
	        print "" } }' "$TSV" >"$dat"
	ncol=$(head -1 "$dat" | awk -F'\t' '{print NF}')
	gnuplot <<GP
set terminal pngcairo size 1000,520 noenhanced
set output "$OUT/$w.png"
set title "($w) $(desc "$w"): median latency per transaction"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set logscale y
set ylabel "ms (log scale)"
set key top left
set grid ytics
set xtics rotate by -20
plot for [i=2:$ncol] "$dat" using i:xtic(1) title columnheader(i)
GP
	rm -f "$dat"
done
