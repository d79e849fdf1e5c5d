/* tf/version.h - the runtime's version, for `tfrun --version` and plugins. */
#ifndef TF_VERSION_H
#define TF_VERSION_H
#define TF_VERSION_STRING "0.1.0"
#endif
