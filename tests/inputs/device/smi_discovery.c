// What ROCm SMI (librocm_smi64) does to find AMD GPUs, with the same libc
// calls: list /sys/class/drm for cardN, stat and read the card's PCI
// vendor, readlink the card to find its PCI slot (the last path part shaped
// like 0000:03:00.0), and match the slot with a KFD node's location_id and
// domain. Prints one line per fact.
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

static unsigned long property(const char *path, const char *name) {
  FILE *file = fopen(path, "r");
  char key[128];
  unsigned long value;
  if (!file) return ~0ul;
  while (fscanf(file, "%127s %lu", key, &value) == 2)
    if (!strcmp(key, name)) { fclose(file); return value; }
  fclose(file);
  return ~0ul;
}

int main(void) {
  DIR *drm = opendir("/sys/class/drm");
  if (!drm) { printf("no /sys/class/drm\n"); return 1; }
  struct dirent *entry;
  while ((entry = readdir(drm))) {
    if (strncmp(entry->d_name, "card", 4)) continue;
    char path[512], link[512];
    struct stat status;
    snprintf(path, sizeof path, "/sys/class/drm/%s/device/vendor", entry->d_name);
    if (stat(path, &status) || !S_ISREG(status.st_mode)) { printf("%s: no vendor file\n", entry->d_name); continue; }
    FILE *file = fopen(path, "r");
    unsigned vendor = 0;
    if (!file || fscanf(file, "%x", &vendor) != 1) { printf("%s: unreadable vendor\n", entry->d_name); continue; }
    fclose(file);
    snprintf(path, sizeof path, "/sys/class/drm/%s", entry->d_name);
    if (lstat(path, &status) || !S_ISLNK(status.st_mode)) printf("%s: not a link\n", entry->d_name);
    ssize_t length = readlink(path, link, sizeof link - 1);
    if (length < 0) { printf("%s: readlink failed\n", entry->d_name); continue; }
    link[length] = 0;
    unsigned domain = 0, bus = 0, device = 0, function = 0;
    for (char *part = strtok(link, "/"); part; part = strtok(NULL, "/"))
      if (strlen(part) == 12 && part[4] == ':' && part[7] == ':' && part[10] == '.')
        sscanf(part, "%x:%x:%x.%x", &domain, &bus, &device, &function);
    unsigned bdf = bus << 8 | device << 3 | function;
    printf("%s: vendor 0x%04x, slot %04x:%02x:%02x.%x (bdf %u)\n", entry->d_name, vendor, domain, bus, device, function, bdf);
    for (int node = 0;; ++node) {
      snprintf(path, sizeof path, "/sys/class/kfd/kfd/topology/nodes/%d/properties", node);
      unsigned long location = property(path, "location_id");
      if (location == ~0ul) break;
      if (location == bdf && property(path, "domain") == domain && property(path, "simd_count") > 0)
        printf("%s: KFD node %d\n", entry->d_name, node);
    }
  }
  closedir(drm);
  struct stat render;
  if (!stat("/dev/dri/renderD128", &render) && S_ISCHR(render.st_mode))
    printf("renderD128: character device %u:%u\n", major(render.st_rdev), minor(render.st_rdev));
  return 0;
}
