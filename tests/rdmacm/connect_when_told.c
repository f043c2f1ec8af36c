/* A plain rdma_cm program (it links librdmacm and knows nothing of vrdma), run through vrdma-run
 * by tests/e2e/test_rdma_cm.py: it resolves ADDR's address and route, prints "resolved", and
 * sends its REQ (rdma_connect, no QP) only once a line comes on stdin, so a test can hold a
 * listener back until the REQ is on its way. Prints the first event that follows and exits 0. */
#include <netdb.h>
#include <rdma/rdma_cma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void fail(const char *what) {
  perror(what);
  exit(1);
}

static void expect(struct rdma_event_channel *ch, enum rdma_cm_event_type want) {
  struct rdma_cm_event *ev;
  if (rdma_get_cm_event(ch, &ev)) fail("rdma_get_cm_event");
  if (ev->event != want) {
    fprintf(stderr, "expected %s, got %s\n", rdma_event_str(want), rdma_event_str(ev->event));
    exit(1);
  }
  rdma_ack_cm_event(ev);
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: connect_when_told ADDR PORT\n");
    return 2;
  }
  struct addrinfo *dst;
  if (getaddrinfo(argv[1], argv[2], NULL, &dst)) fail("getaddrinfo");
  struct rdma_event_channel *ch = rdma_create_event_channel();
  struct rdma_cm_id *id;
  if (!ch || rdma_create_id(ch, &id, NULL, RDMA_PS_TCP)) fail("rdma_create_id");
  if (rdma_resolve_addr(id, NULL, dst->ai_addr, 2000)) fail("rdma_resolve_addr");
  expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED);
  if (rdma_resolve_route(id, 2000)) fail("rdma_resolve_route");
  expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED);
  printf("resolved\n");
  fflush(stdout);
  char line[16];
  if (!fgets(line, sizeof line, stdin)) return 1;
  struct rdma_conn_param param;
  memset(&param, 0, sizeof param);
  if (rdma_connect(id, &param)) fail("rdma_connect");
  struct rdma_cm_event *ev;
  if (rdma_get_cm_event(ch, &ev)) fail("rdma_get_cm_event");
  printf("event %s status %d\n", rdma_event_str(ev->event), ev->status);
  rdma_ack_cm_event(ev);
  rdma_destroy_id(id);
  rdma_destroy_event_channel(ch);
  freeaddrinfo(dst);
  return 0;
}
