"""The autoencoder of a latent deployment: a small KL-regularised convolutional autoencoder trained here
(no pretrained VAE can be had offline), its training, its checkpoint and the decoder the decoder worker
serves. The card it writes is ddm.schema.autoencoder_card."""
