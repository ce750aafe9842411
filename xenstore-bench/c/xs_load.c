/*
 * The libxenstore client loop of xenstore-bench: what real clients pay,
 * library included. Reaches the daemon named by XENSTORED_PATH.
 *   xs_load read|write SECONDS
 * Reads or writes /bench/c0/k0..k63 (seeded by xenstore-bench) one request
 * at a time and prints: ops N secs S p50_ns P p99_ns Q
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xenstore.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int cmp(const void *a, const void *b)
{
	unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	static const char value[] =
		"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
	if (argc != 3 || (strcmp(argv[1], "read") && strcmp(argv[1], "write"))) {
		fprintf(stderr, "usage: xs_load read|write SECONDS\n");
		return 2;
	}
	int writing = !strcmp(argv[1], "write");
	double secs = atof(argv[2]);
	struct xs_handle *h = xs_open(0);
	if (!h) {
		perror("xs_open");
		return 1;
	}
	size_t cap = 1 << 20, n = 0;
	unsigned *lat = malloc(cap * sizeof *lat);
	char path[64];
	double start = now(), end = start + secs, t;
	while ((t = now()) < end) {
		snprintf(path, sizeof path, "/bench/c0/k%zu", n % 64);
		if (writing) {
			if (!xs_write(h, XBT_NULL, path, value, sizeof value - 1)) {
				perror("xs_write");
				return 1;
			}
		} else {
			unsigned len;
			char *v = xs_read(h, XBT_NULL, path, &len);
			if (!v || len != sizeof value - 1) {
				perror("xs_read");
				return 1;
			}
			free(v);
		}
		if (n == cap)
			lat = realloc(lat, (cap *= 2) * sizeof *lat);
		lat[n++] = (unsigned)((now() - t) * 1e9);
	}
	double took = now() - start;
	qsort(lat, n, sizeof *lat, cmp);
	printf("ops %zu secs %f p50_ns %u p99_ns %u\n", n, took,
	       n ? lat[n / 2] : 0, n ? lat[(size_t)((n - 1) * 0.99)] : 0);
	xs_close(h);
	return 0;
}
