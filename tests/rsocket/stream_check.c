/* A byte stream checked end to end, for rsockets (run it under `vrdma-run --rsocket`): the sender
 * sends a stream whose every byte is a function of its position, in pieces of pseudo-random sizes
 * (1 B to 256 KiB, so pieces wrap the rings at every offset); the receiver reads it in pieces of
 * other sizes and checks every byte against its position.
 *
 *   stream_check serve PORT            accepts one connection, receives to its end, answers
 *                                      "ok N" (or "bad AT"), prints the same
 *   stream_check send HOST PORT BYTES  sends BYTES, shuts its side down, prints the answer;
 *                                      exit 0 only on "ok BYTES"
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
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

int main(int argc, char** argv) {
  if (argc == 3 && !strcmp(argv[1], "serve")) return serve(atoi(argv[2]));
  if (argc == 5 && !strcmp(argv[1], "send")) return send_stream(argv[2], atoi(argv[3]), strtoull(argv[4], NULL, 10));
  fprintf(stderr, "usage: stream_check serve PORT | send HOST PORT BYTES\n");
  return 2;
}
