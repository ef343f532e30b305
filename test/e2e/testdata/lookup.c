/* lookup: the libc resolver of the binary it is linked with (built with
 * musl-gcc -static by the test), as an application calls it.
 *
 *   lookup NAME   getaddrinfo(NAME, AF_UNSPEC): one address a line
 *   lookup -x IP  getnameinfo(IP, NI_NAMEREQD): the PTR name
 *
 * Exit 2 when the lookup fails, with the error on stderr. */
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <arpa/inet.h>
#include <netinet/in.h>

static int reverse(const char *ip) {
	struct sockaddr_storage ss;
	socklen_t len;
	memset(&ss, 0, sizeof ss);
	if (strchr(ip, ':')) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
		s6->sin6_family = AF_INET6;
		if (inet_pton(AF_INET6, ip, &s6->sin6_addr) != 1) return 2;
		len = sizeof *s6;
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
		s4->sin_family = AF_INET;
		if (inet_pton(AF_INET, ip, &s4->sin_addr) != 1) return 2;
		len = sizeof *s4;
	}
	char host[NI_MAXHOST];
	int rc = getnameinfo((struct sockaddr *)&ss, len, host, sizeof host, NULL, 0, NI_NAMEREQD);
	if (rc != 0) {
		fprintf(stderr, "getnameinfo %s: %s\n", ip, gai_strerror(rc));
		return 2;
	}
	printf("%s\n", host);
	return 0;
}

int main(int argc, char **argv) {
	if (argc == 3 && strcmp(argv[1], "-x") == 0) return reverse(argv[2]);
	if (argc != 2) {
		fprintf(stderr, "usage: lookup NAME | lookup -x IP\n");
		return 1;
	}
	struct addrinfo hints, *res, *ai;
	memset(&hints, 0, sizeof hints);
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	int rc = getaddrinfo(argv[1], NULL, &hints, &res);
	if (rc != 0) {
		fprintf(stderr, "getaddrinfo %s: %s\n", argv[1], gai_strerror(rc));
		return 2;
	}
	for (ai = res; ai; ai = ai->ai_next) {
		char buf[INET6_ADDRSTRLEN];
		const void *a = ai->ai_family == AF_INET6 ? (const void *)&((struct sockaddr_in6 *)ai->ai_addr)->sin6_addr
		                                          : (const void *)&((struct sockaddr_in *)ai->ai_addr)->sin_addr;
		printf("%s\n", inet_ntop(ai->ai_family, a, buf, sizeof buf));
	}
	freeaddrinfo(res);
	return 0;
}
