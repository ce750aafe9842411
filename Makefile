# The commands of README (`make demo`, `make demo-xen`, `make test`), and
# installation: `make install` (any Linux host) and `make deb` (a Debian
# package) share the one file list below.
.PHONY: demo demo-xen test check daemon miri deb install sim-long sim-replay fuzz-long soak

demo:
	.ci/setup
	cargo build --release --workspace
	scripts/demo

# Real Xen in QEMU (TCG): dom0 runs the release shim as its xenstored,
# xenstore-snoop watches two PV guests live and die (tests/xen/run).
# XEN=4.20 (default: Debian 13's, what a Xen host installs today) or 4.17.
XEN ?= 4.20
demo-xen:
	.ci/setup
	cargo build --release --workspace
	tests/xen/run --xen $(XEN) --out target/xen/demo; status=$$?; \
	    cat target/xen/demo/steps target/xen/demo/times; echo; \
	    cat target/xen/demo/snoop.out; cat target/xen/demo/snoop.err; exit $$status

# clippy lints the workspace's crates as they compile (cargo's workspace
# wrapper, what `cargo clippy` runs over a check build; -D warnings in
# clippy's own spelling), so that make test compiles them once, not twice.
test: export RUSTC_WORKSPACE_WRAPPER = clippy-driver
test: export CLIPPY_ARGS = -D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__
test:
	.ci/setup
	# Xen's parts download while the builds compute (tests/xen/prepare
	# holds a lock a release: the vm tier's boots wait for these).
	mkdir -p target/xen
	tests/xen/prepare --xen 4.17 >target/xen/prepare-4.17.log 2>&1 &
	tests/xen/prepare --xen 4.20 >target/xen/prepare-4.20.log 2>&1 &
	cargo build --workspace
	cargo test --workspace --no-run
	cargo build --release -p xenstored-probes -p xenstore-snoop
	# The vm tier (QEMU under TCG, the guests mostly waiting on timers: a
	# boot keeps a core busy half the time) starts as soon as it is built
	# and runs beside everything else, its boots (the release binaries,
	# which `make deb` packages) taking the slots of
	# tests/vm/slots.rs, a thread each; its output follows the rest's. The
	# snooper's suites run once per capture back end: bpf, then tracefs
	# (tests/common: XS_SNOOP_BACKEND). Then each fuzz target briefly from
	# its corpus (cargo test replayed every corpus already; hours: make
	# fuzz-long). Every part runs, whatever failed. tests/service/package.rs
	# installs the package `make deb` builds; tests/peer/fetch brings C
	# xenstored 4.20, the second conformance reference.
	XS_SNOOP_BACKEND=bpf cargo test --test vm -- --test-threads 16 >target/vm-tier.log 2>&1 & vm=$$!; status=0; \
	cargo clippy -p xenstored-probes --no-default-features --all-targets -- -D warnings || status=1; \
	scripts/module-graph --quiet || status=1; \
	$(MAKE) deb || status=1; \
	tests/peer/fetch 4.20 || status=1; \
	XS_SNOOP_BACKEND=bpf cargo test --workspace -- \
	    --skip real_xen:: --skip xl_matrix:: --skip bpf_kernels:: || status=1; \
	XS_SNOOP_BACKEND=tracefs cargo test --test snoop || status=1; \
	XS_SNOOP_BACKEND=tracefs cargo test --test tracers scripts_live:: || status=1; \
	XS_SNOOP_BACKEND=tracefs cargo test --test daemon live_update:: || status=1; \
	scripts/fuzz-smoke 2 || status=1; \
	wait $$vm || status=1; \
	echo "make test: the vm tier's output:"; cat target/vm-tier.log; exit $$status

# The event loop's simulation for minutes (xenstored-probes/src/server/sim/):
# SIM_PASSES loop passes (default 10 million) from SIM_FIRST_SEED
# (default 1000000), in release. `make test` runs seeds 0..100.
sim-long:
	cargo test --release -p xenstored-probes --features simulation --lib \
	    server::sim::tests::long_run -- --ignored --nocapture

# One seed of the simulation again, bit for bit: SIM_SEED=N make sim-replay.
sim-replay:
	cargo test -p xenstored-probes --features simulation --lib \
	    server::sim::tests::long_run -- --ignored --nocapture

# Each fuzz target for FUZZ_SECS seconds (default an hour) from its corpus;
# new inputs in a scratch directory, a crash under xenstore-fuzz/fuzz/artifacts/.
FUZZ_SECS ?= 3600
fuzz-long:
	.ci/setup
	scripts/fuzz-smoke $(FUZZ_SECS)

# The soak for SOAK_SECS seconds (default 300): a release shim under mixed
# load while snoopers are killed and restarted (SOAK.md).
SOAK_SECS ?= 300
soak:
	cargo build --release --workspace
	target/release/xenstore-bench soak --secs $(SOAK_SECS)

# Miri runs store/packed_node.rs's tests (a node packed by hand into one heap block,
# read through raw pointers) looking for undefined behaviour. It needs a
# nightly toolchain with miri (`rustup toolchain install nightly --component
# miri,rust-src`), which the machines CI runs on are not promised to reach,
# so `make test` leaves it out. About 2 min cold, 1 s warm.
miri:
	cargo +nightly miri test -p xenstored-probes --lib store::packed_node::

# After an edit, in under two minutes (a built tree): build, clippy, no
# module cycles, every crate's unit tests and the contract tests; no root,
# daemons or tracing. `make test` stays the whole suite CI runs.
check:
	cargo build --workspace
	cargo clippy --workspace --all-targets -- -D warnings
	scripts/module-graph --quiet
	cargo test --workspace --lib --bins -q
	cargo test -q -p xenstore-snoop --test bpf_contract
	cargo test -q --test contract -- --skip readme:: --skip demo::

# After a daemon edit, in about a minute on a built tree (no root needed):
# the daemon crate's unit tests (the loop's simulation among them) and the
# daemon tier, its end-to-end tests against real clients and upstream
# daemons (tests/README.md), with the binaries those run built first.
daemon:
	cargo build -q -p xenstored-probes -p xenstore-guest -p xenstore-snoop --bins
	cargo test -q -p xenstored-probes
	cargo test -q --test daemon

# The package holds the two installed binaries: only their crates build.
deb:
	cargo build --release -p xenstored-probes -p xenstore-snoop
	packaging/build-deb

# Where `make install` puts things; `make deb` uses PREFIX=/usr.
PREFIX ?= /usr/local
DESTDIR ?=
SYSCONFDIR ?= $(if $(filter /usr,$(PREFIX)),/etc,$(PREFIX)/etc)
UNITDIR ?= $(if $(filter /usr,$(PREFIX)),/lib/systemd/system,$(PREFIX)/lib/systemd/system)
BIN_DIR ?= target/release
SHARE := $(DESTDIR)$(PREFIX)/share
MAN := $(SHARE)/man

# The file list: every file `make install` and the package ship.
install:
	@for b in xenstored-shim xenstore-snoop; do \
	    [ -x $(BIN_DIR)/$$b ] || { echo "install: $(BIN_DIR)/$$b missing: cargo build --release --workspace" >&2; exit 1; }; done
	install -D -m 755 $(BIN_DIR)/xenstored-shim $(DESTDIR)$(PREFIX)/sbin/xenstored-shim
	install -D -m 755 $(BIN_DIR)/xenstore-snoop $(DESTDIR)$(PREFIX)/bin/xenstore-snoop
	install -D -m 644 man/xenstore-snoop.1 $(MAN)/man1/xenstore-snoop.1
	install -D -m 644 man/xenstored-probes.7 $(MAN)/man7/xenstored-probes.7
	install -D -m 644 man/xenstore-scripts.7 $(MAN)/man7/xenstore-scripts.7
	install -D -m 644 man/xenstored-shim.8 $(MAN)/man8/xenstored-shim.8
	gzip -9nf $(MAN)/man1/xenstore-snoop.1 \
	    $(MAN)/man7/xenstored-probes.7 $(MAN)/man7/xenstore-scripts.7 $(MAN)/man8/xenstored-shim.8
	install -D -m 644 xenstore-snoop/completions/xenstore-snoop.bash \
	    $(SHARE)/bash-completion/completions/xenstore-snoop
	install -D -m 644 xenstore-snoop/completions/_xenstore-snoop $(SHARE)/zsh/vendor-completions/_xenstore-snoop
	install -D -m 644 xenstore-snoop/completions/xenstore-snoop.fish \
	    $(SHARE)/fish/vendor_completions.d/xenstore-snoop.fish
	# The tapset names the installed daemon, so `stap` finds it without PATH.
	install -d $(SHARE)/systemtap/tapset
	sed 's|^@define XS_BINARY .*|@define XS_BINARY %( "$(PREFIX)/sbin/xenstored-shim" %)|' \
	    scripts/xenstore.stp > $(SHARE)/systemtap/tapset/xenstore.stp
	chmod 644 $(SHARE)/systemtap/tapset/xenstore.stp
	install -D -m 755 scripts/xenstore-snoop.bt $(SHARE)/xenstore-snoop/xenstore-snoop.bt
	install -D -m 755 scripts/xs-stacks.bt $(SHARE)/xenstore-snoop/xs-stacks.bt
	install -D -m 755 scripts/xs-latency.bt $(SHARE)/xenstore-snoop/xs-latency.bt
	install -D -m 755 scripts/xenstore-snoop.d $(SHARE)/xenstore-snoop/xenstore-snoop.d
	install -D -m 755 scripts/xs-stack-correlate $(SHARE)/xenstore-snoop/xs-stack-correlate
	install -d $(DESTDIR)$(UNITDIR)
	sed 's|/usr/sbin/xenstored-shim|$(PREFIX)/sbin/xenstored-shim|; s|/etc/default/|$(SYSCONFDIR)/default/|' \
	    xenstored-probes/systemd/xenstored-shim.service > $(DESTDIR)$(UNITDIR)/xenstored-shim.service
	chmod 644 $(DESTDIR)$(UNITDIR)/xenstored-shim.service
	install -D -m 644 xenstored-probes/systemd/README.md $(SHARE)/doc/xenstore-snoop/README.systemd
	install -D -m 644 packaging/default $(DESTDIR)$(SYSCONFDIR)/default/xenstored-shim
	# --metrics: the exporter's unit (off until enabled) and alerting rules.
	sed 's|/usr/bin/xenstore-snoop|$(PREFIX)/bin/xenstore-snoop|' \
	    xenstore-snoop/systemd/xenstore-snoop-metrics.service > $(DESTDIR)$(UNITDIR)/xenstore-snoop-metrics.service
	chmod 644 $(DESTDIR)$(UNITDIR)/xenstore-snoop-metrics.service
	install -D -m 644 xenstore-snoop/prometheus/xenstore-alerts.yml $(SHARE)/xenstore-snoop/xenstore-alerts.yml
	install -D -m 644 xenstore-snoop/prometheus/xenstore-alerts.test.yml $(SHARE)/xenstore-snoop/xenstore-alerts.test.yml
