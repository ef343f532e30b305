/*
 * resolveloop looks names up with the C library's getaddrinfo (AF_INET), in
 * a loop, and prints one line per lookup:
 *
 *   <unix ms> <name> ok <duration ms> <addresses, sorted, comma-separated>
 *   <unix ms> <name> fail <duration ms> <reason>
 *
 * test/cluster builds it twice, against glibc (gcc) and musl (musl-gcc
 * -static), so that pods resolve with each real stub resolver.
 *
 * Usage: resolveloop PAUSE_MS NAME...
 */
#include <netdb.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

static long long now_ms(int clock) {
	struct timespec ts;
	clock_gettime(clock, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int cmp(const void *a, const void *b) { return strcmp(a, b); }

int main(int argc, char **argv) {
	if (argc < 3) {
		fprintf(stderr, "usage: resolveloop PAUSE_MS NAME...\n");
		return 2;
	}
	long pause = atol(argv[1]);
	struct timespec ts = {pause / 1000, (pause % 1000) * 1000000};
	char addrs[32][INET_ADDRSTRLEN];
	for (;;) {
		for (int i = 2; i < argc; i++) {
			struct addrinfo hints, *res = NULL;
			memset(&hints, 0, sizeof hints);
			hints.ai_family = AF_INET;
			hints.ai_socktype = SOCK_STREAM;
			long long start = now_ms(CLOCK_MONOTONIC);
			int rc = getaddrinfo(argv[i], NULL, &hints, &res);
			long long took = now_ms(CLOCK_MONOTONIC) - start;
			if (rc != 0) {
				printf("%lld %s fail %lld %s\n", now_ms(CLOCK_REALTIME), argv[i], took, gai_strerror(rc));
			} else {
				int n = 0;
				for (struct addrinfo *ai = res; ai && n < 32; ai = ai->ai_next) {
					char buf[INET_ADDRSTRLEN];
					inet_ntop(AF_INET, &((struct sockaddr_in *)ai->ai_addr)->sin_addr, buf, sizeof buf);
					int dup = 0;
					for (int j = 0; j < n; j++) dup |= strcmp(addrs[j], buf) == 0;
					if (!dup) strcpy(addrs[n++], buf);
				}
				freeaddrinfo(res);
				qsort(addrs, n, sizeof addrs[0], cmp);
				printf("%lld %s ok %lld ", now_ms(CLOCK_REALTIME), argv[i], took);
				for (int j = 0; j < n; j++) printf("%s%s", j ? "," : "", addrs[j]);
				printf("\n");
			}
			fflush(stdout);
			nanosleep(&ts, NULL);
		}
	}
}
