/* A FUSE filesystem that never answers FLUSH or READ: close() of any descriptor of its one file,
 * "f", waits until this program ends (the kernel then fails the request), and so does a read of
 * it, or a fault on a page of it mapped. The e2e tests mount it (as root, allow_other) and let
 * another uid open "f" and hand the descriptor to the router, or hold a lock in a fault on it.
 *
 *   stalled_fuse MOUNTPOINT [UID]   prints "ready" once mounted; on SIGTERM or SIGINT, unmounts and
 *                               ends, which lets every waiting close return. With UID, the mount
 *                               is that user's alone (no allow_other, as fusermount leaves a
 *                               user's mount: even root's fstat of its file is refused) and the
 *                               server then runs as that user.
 *
 * Talks to /dev/fuse directly (no libfuse): INIT, LOOKUP, GETATTR, OPEN, RELEASE and STATFS are
 * answered, FLUSH, READ and INTERRUPT never, anything else with ENOSYS. */
#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

enum { kFileNode = 2 };

static volatile sig_atomic_t g_stop;

static void on_stop(int sig) {
  (void)sig;
  g_stop = 1;
}

static void reply(int dev, uint64_t unique, int err, const void* body, size_t len) {
  char buf[sizeof(struct fuse_out_header) + 256];
  struct fuse_out_header h = {.len = (uint32_t)(sizeof h + len), .error = -err, .unique = unique};
  memcpy(buf, &h, sizeof h);
  if (len) memcpy(buf + sizeof h, body, len);
  if (write(dev, buf, h.len) < 0 && errno != ENOENT) perror("stalled_fuse: write");
}

static void fill_attr(struct fuse_attr* a, uint64_t node) {
  memset(a, 0, sizeof *a);
  a->ino = node;
  a->mode = node == FUSE_ROOT_ID ? (S_IFDIR | 0755) : (S_IFREG | 0666);
  a->nlink = node == FUSE_ROOT_ID ? 2 : 1;
  a->size = node == FUSE_ROOT_ID ? 0 : 4096;
  a->blksize = 4096;
}

static void serve(int dev, const char* req) {
  const struct fuse_in_header* h = (const void*)req;
  const void* in = req + sizeof *h;
  switch (h->opcode) {
    case FUSE_INIT: {
      const struct fuse_init_in* i = in;
      struct fuse_init_out o = {.major = FUSE_KERNEL_VERSION, .minor = FUSE_KERNEL_MINOR_VERSION,
                                .max_readahead = i->max_readahead, .max_write = 4096};
      reply(dev, h->unique, 0, &o, sizeof o);
      return;
    }
    case FUSE_LOOKUP: {
      if (h->nodeid != FUSE_ROOT_ID || strcmp(in, "f") != 0) return reply(dev, h->unique, ENOENT, NULL, 0);
      struct fuse_entry_out e = {.nodeid = kFileNode, .generation = 1};
      fill_attr(&e.attr, kFileNode);
      return reply(dev, h->unique, 0, &e, sizeof e);
    }
    case FUSE_GETATTR: {
      struct fuse_attr_out a = {0};
      fill_attr(&a.attr, h->nodeid);
      return reply(dev, h->unique, 0, &a, sizeof a);
    }
    case FUSE_OPEN: {
      struct fuse_open_out o = {.fh = 1};
      return reply(dev, h->unique, 0, &o, sizeof o);
    }
    case FUSE_STATFS: {
      struct fuse_statfs_out s = {.st = {.bsize = 4096, .namelen = 255, .frsize = 4096}};
      return reply(dev, h->unique, 0, &s, sizeof s);
    }
    case FUSE_RELEASE:
    case FUSE_RELEASEDIR: return reply(dev, h->unique, 0, NULL, 0);
    case FUSE_FLUSH:
    case FUSE_READ:
    case FUSE_INTERRUPT:
    case FUSE_FORGET:
    case FUSE_BATCH_FORGET: return; /* never answered (FORGET never is) */
    default: return reply(dev, h->unique, ENOSYS, NULL, 0);
  }
}

int main(int argc, char** argv) {
  if (argc != 2 && argc != 3) {
    fprintf(stderr, "usage: stalled_fuse MOUNTPOINT [UID]\n");
    return 2;
  }
  int owner = argc == 3 ? atoi(argv[2]) : -1;
  struct sigaction sa = {.sa_handler = on_stop};
  sigaction(SIGTERM, &sa, NULL);  /* no SA_RESTART: read() returns EINTR */
  sigaction(SIGINT, &sa, NULL);
  int dev = open("/dev/fuse", O_RDWR | O_CLOEXEC);
  if (dev < 0) {
    perror("stalled_fuse: /dev/fuse");
    return 1;
  }
  char opts[128];
  if (owner < 0)
    snprintf(opts, sizeof opts, "fd=%d,rootmode=40000,user_id=0,group_id=0,allow_other", dev);
  else
    snprintf(opts, sizeof opts, "fd=%d,rootmode=40000,user_id=%d,group_id=%d", dev, owner, owner);
  if (mount("stalled", argv[1], "fuse.stalled", MS_NOSUID | MS_NODEV, opts) != 0) {
    perror("stalled_fuse: mount");
    return 1;
  }
  if (owner >= 0 && (setgid((gid_t)owner) != 0 || setuid((uid_t)owner) != 0)) {
    perror("stalled_fuse: setuid");
    return 1;
  }
  printf("ready\n");
  fflush(stdout);
  static char req[FUSE_MIN_READ_BUFFER + 65536];
  while (!g_stop) {
    ssize_t n = read(dev, req, sizeof req);
    if (n < 0) {
      if (errno == EINTR || errno == ENOENT || errno == EAGAIN) continue;
      if (errno == ENODEV) break; /* unmounted */
      perror("stalled_fuse: read");
      break;
    }
    if ((size_t)n >= sizeof(struct fuse_in_header)) serve(dev, req);
  }
  umount2(argv[1], MNT_DETACH);
  close(dev); /* the connection ends: every FLUSH still waiting fails, and its close returns */
  return 0;
}
