/* progress.c - a rate-limited progress bar, only on a terminal. */
#include <time.h>
#include <unistd.h>

#include "tf/progress.h"

#define BAR_WIDTH 20
#define REDRAW_S 0.1

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void tf_progress_init(tf_progress *p, const char *label, uint64_t total, tf_progress_unit unit)
{
	*p = (tf_progress){
		.out = isatty(STDERR_FILENO) ? stderr : NULL,
		.label = label, .unit = unit, .total = total,
	};
	p->t0 = p->last = now();
}

/* "1.4/2.7 GiB" or "1536/4096 tokens". */
static void amount(const tf_progress *p, char *buf, size_t n)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double d = (double)p->done, t = (double)p->total;
	int u = 0;

	if (p->unit == TF_PROGRESS_TOKENS) {
		snprintf(buf, n, "%llu/%llu tokens", (unsigned long long)p->done,
			 (unsigned long long)p->total);
		return;
	}
	while (t >= 1024 && u < 4) {
		d /= 1024;
		t /= 1024;
		u++;
	}
	snprintf(buf, n, "%.1f/%.1f %s", d, t, units[u]);
}

static void draw(tf_progress *p, double t)
{
	char bar[BAR_WIDTH + 1], amt[64];
	double frac = p->total ? (double)p->done / (double)p->total : 1;
	int i, fill;

	if (frac > 1)
		frac = 1;
	fill = (int)(frac * BAR_WIDTH);
	for (i = 0; i < BAR_WIDTH; i++)
		bar[i] = i < fill ? '#' : '-';
	bar[BAR_WIDTH] = 0;
	amount(p, amt, sizeof(amt));
	/* \r and clear-to-end: redraw the same line */
	fprintf(p->out, "\r%s  [%s] %3d%%  %s  %.1f s\033[K", p->label, bar,
		(int)(frac * 100), amt, t - p->t0);
	fflush(p->out);
	p->last = t;
}

void tf_progress_update(tf_progress *p, uint64_t done)
{
	double t;

	p->done = done;
	if (!p->out)
		return;
	t = now();
	if (t - p->last >= REDRAW_S)
		draw(p, t);
}

void tf_progress_finish(tf_progress *p)
{
	if (!p->out)
		return;
	draw(p, now());
	fputc('\n', p->out);
	p->out = NULL;
}
