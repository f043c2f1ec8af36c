/* A byte stream checked end to end, for rsockets (run it under `vrdma-run --rsocket`): the sender
 * sends a stream whose every byte is a function of its position, in pieces of pseudo-random sizes
 * (1 B to 256 KiB, so pieces wrap the rings at every offset); the receiver reads it in pieces of
 * other sizes and checks every byte against its position.
 *
 *   stream_check serve PORT            accepts one connection, receives to its end, answers
 *                                      "ok N" (or "bad AT"), prints the same
 *   stream_check send HOST PORT BYTES  sends BYTES, shuts its side down, prints the answer;
 *                                      exit 0 only on "ok BYTES"
 *   stream_check echo PORT             accepts one connection, sends back each byte it gets
 *   stream_check halfclose PORT SECS   accepts one connection, ends its own side at once, reads
 *                                      nothing for SECS seconds, then closes
 *   stream_check pingpong HOST PORT N  N round trips of 1 byte with an echo server; prints
 *                                      "p50_us X": half the median round trip
 *   stream_check pollwait PORT         accepts one connection, reads it to its end waiting in
 *                                      poll() (no timeout) before each read, prints "ended"
 */
#include <poll.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static uint8_t byte_at(uint64_t p) { return (uint8_t)((p * 2654435761u) >> 11 ^ p >> 17); }

static uint64_t next(uint64_t* s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static char buf[1 << 18];

static int serve(int port) {
  int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(l, (struct sockaddr*)&a, sizeof a) || listen(l, 1)) return perror("bind/listen"), 1;
  printf("listening\n");
  fflush(stdout);
  int c = accept(l, NULL, NULL);
  if (c < 0) return perror("accept"), 1;
  uint64_t seed = 7, at = 0, bad = UINT64_MAX;
  for (;;) {
    ssize_t n = recv(c, buf, 1 + next(&seed) % sizeof buf, 0);
    if (n < 0) return perror("recv"), 1;
    if (n == 0) break;
    for (ssize_t i = 0; i < n && bad == UINT64_MAX; ++i)
      if ((uint8_t)buf[i] != byte_at(at + (uint64_t)i)) bad = at + (uint64_t)i;
    at += (uint64_t)n;
  }
  char answer[64];
  int len = bad == UINT64_MAX ? snprintf(answer, sizeof answer, "ok %llu", (unsigned long long)at)
                              : snprintf(answer, sizeof answer, "bad %llu", (unsigned long long)bad);
  send(c, answer, (size_t)len, 0);
  printf("%s\n", answer);
  close(c);
  close(l);
  return bad == UINT64_MAX ? 0 : 1;
}

static int send_stream(const char* host, int port, uint64_t total) {
  int c = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  inet_pton(AF_INET, host, &a.sin_addr);
  if (connect(c, (struct sockaddr*)&a, sizeof a)) return perror("connect"), 1;
  uint64_t seed = 11, at = 0;
  while (at < total) {
    uint64_t size = 1 + next(&seed) % sizeof buf;
    if (size > total - at) size = total - at;
    for (uint64_t i = 0; i < size; ++i) buf[i] = (char)byte_at(at + i);
    for (uint64_t done = 0; done < size;) {
      ssize_t n = send(c, buf + done, size - done, 0);
      if (n <= 0) return perror("send"), 1;
      done += (uint64_t)n;
    }
    at += size;
  }
  shutdown(c, SHUT_WR);
  char answer[64] = {0};
  for (size_t got = 0; got < sizeof answer - 1;) {
    ssize_t n = recv(c, answer + got, sizeof answer - 1 - got, 0);
    if (n < 0) perror("recv");
    if (n <= 0) break;
    got += (size_t)n;
  }
  printf("sent %llu: %s\n", (unsigned long long)total, answer);
  char want[64];
  snprintf(want, sizeof want, "ok %llu", (unsigned long long)total);
  return strcmp(answer, want) == 0 ? 0 : 1;
}

static int listen_one(int port) {
  int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(l, (struct sockaddr*)&a, sizeof a) || listen(l, 1)) return perror("bind/listen"), -1;
  printf("listening\n");
  fflush(stdout);
  int c = accept(l, NULL, NULL);
  close(l);
  return c;
}

static int echo(int port) {
  int c = listen_one(port);
  if (c < 0) return 1;
  char b;
  while (recv(c, &b, 1, 0) == 1)
    if (send(c, &b, 1, 0) != 1) break;
  close(c);
  return 0;
}

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int by_value(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

static int pingpong(const char* host, int port, int n) {
  int c = socket(AF_INET, SOCK_STREAM, 0), one = 1;
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  inet_pton(AF_INET, host, &a.sin_addr);
  if (connect(c, (struct sockaddr*)&a, sizeof a)) return perror("connect"), 1;
  setsockopt(c, IPPROTO_TCP, 1 /* TCP_NODELAY */, &one, sizeof one);
  double* rtt = malloc(sizeof(double) * (size_t)n);
  char b = 'x';
  for (int i = 0; i < n; ++i) {
    double t0 = now_us();
    if (send(c, &b, 1, 0) != 1 || recv(c, &b, 1, 0) != 1) return perror("ping-pong"), 1;
    rtt[i] = now_us() - t0;
  }
  qsort(rtt, (size_t)n, sizeof *rtt, by_value);
  printf("p50_us %.3f\n", rtt[n / 2] / 2);
  free(rtt);
  close(c);
  return 0;
}

static int halfclose(int port, int seconds) {
  int c = listen_one(port);
  if (c < 0) return 1;
  shutdown(c, SHUT_WR);
  sleep((unsigned)seconds);
  close(c);
  return 0;
}

static int pollwait(int port) {
  int c = listen_one(port);
  if (c < 0) return 1;
  for (;;) {
    struct pollfd p = {.fd = c, .events = POLLIN};
    if (poll(&p, 1, -1) < 0) return perror("poll"), 1;
    if (recv(c, buf, sizeof buf, 0) <= 0) break;
  }
  printf("ended\n");
  close(c);
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 4 && !strcmp(argv[1], "halfclose")) return halfclose(atoi(argv[2]), atoi(argv[3]));
  if (argc == 3 && !strcmp(argv[1], "echo")) return echo(atoi(argv[2]));
  if (argc == 3 && !strcmp(argv[1], "pollwait")) return pollwait(atoi(argv[2]));
  if (argc == 5 && !strcmp(argv[1], "pingpong")) return pingpong(argv[2], atoi(argv[3]), atoi(argv[4]));
  if (argc == 3 && !strcmp(argv[1], "serve")) return serve(atoi(argv[2]));
  if (argc == 5 && !strcmp(argv[1], "send")) return send_stream(argv[2], atoi(argv[3]), strtoull(argv[4], NULL, 10));
  fprintf(stderr, "usage: stream_check serve PORT | send HOST PORT BYTES | echo PORT | pingpong HOST PORT N | "
                  "pollwait PORT\n");
  return 2;
}
