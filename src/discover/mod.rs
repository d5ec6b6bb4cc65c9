//! Host discovery: the hard classes and `sys.*` variables cf-agent 3.21
//! defines before reading any policy. (Being filled in.)
