// The bundled demo: a tiny "order gateway" that handles a batch of requests. One request in the
// batch takes a slow path (a latency spike), which is exactly what a ptscope trace makes visible:
// open demo.pftrace in ui.perfetto.dev and look for the one long handle_request slice.
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

struct Order {
  uint32_t id;
  uint32_t price;
  uint32_t quantity;
  char symbol[8];
};

static uint32_t checksum_table[64];

__attribute__((noinline)) static uint32_t mix(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= x >> 15;
  return x;
}

__attribute__((noinline)) static int validate(const struct Order* o) {
  return o->quantity > 0 && o->price > 0 && o->symbol[0] != '\0';
}

__attribute__((noinline)) static uint32_t price_level(uint32_t price, int depth) {
  // Recursion: walks a price ladder; deep for the unlucky request.
  if (depth == 0) return mix(price);
  return price_level(price + 1, depth - 1) ^ (uint32_t)depth;
}

__attribute__((noinline)) static void rebuild_checksums(void) {
  // The slow path: only taken when the table is stale.
  for (uint32_t i = 0; i < 64; i++) checksum_table[i] = mix(i * 2654435761U);
}

__attribute__((noinline)) static uint32_t route(const struct Order* o) {
  uint32_t level = price_level(o->price, (o->id % 17 == 16) ? 40 : 3);
  return checksum_table[level & 63] + o->quantity;
}

__attribute__((noinline)) static uint32_t handle_request(struct Order* o) {
  if (!validate(o)) return 0;
  if (o->id == 33) rebuild_checksums();  // the latency spike
  return route(o);
}

int main(void) {
  struct Order orders[48];
  for (uint32_t i = 0; i < 48; i++) {
    orders[i].id = i;
    orders[i].price = 100 + i;
    orders[i].quantity = 1 + (i % 5);
    memcpy(orders[i].symbol, "PTSC", 5);
  }
  rebuild_checksums();
  uint32_t total = 0;
  for (int i = 0; i < 48; i++) total += handle_request(&orders[i]);
  char line[64];
  int n = snprintf(line, sizeof line, "demo: handled 48 orders, digest %08x\n", total);
  if (write(1, line, (size_t)n) < 0) return 1;
  return 0;
}
